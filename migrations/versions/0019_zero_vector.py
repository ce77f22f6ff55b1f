"""``pglogic.search()`` refuses a zero vector, as the Python search does.

A term's vector, an entry of ``"vectors"`` or a guide of all zeros has no direction: its cosine
distance is NaN, and the function returned arbitrary rows with score 0 where Python refuses it
(``pglogic.store.ingest.vector_problem``). ``pglogic._vector`` now raises SQLSTATE 22023
("Invalid vector for term 'x': it is a zero vector ...").

Applies ``versions/sql/0019_search.sql`` (the statements of ``sql/search.sql`` this revision
changed: ``pglogic._vector``, arguments and result unchanged); downgrading restores 0018's text.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

#: Code one revision older works with a database at this revision, and the reverse: only the
#: refusal of an input the Python code refuses itself changes.
COMPATIBLE_WITH_PREVIOUS = True


def upgrade() -> None:
    op.run_sql_file("0019_search.sql")
    op.run_sql(
        "INSERT INTO pglogic.schema_compat VALUES "
        f"('{revision}', '{down_revision if COMPATIBLE_WITH_PREVIOUS else revision}');"
    )


def downgrade() -> None:
    op.run_sql(f"DELETE FROM pglogic.schema_compat WHERE revision = '{revision}';")
    op.restore_sql_file("0019_search.sql")
