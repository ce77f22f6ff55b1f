"""``pglogic.search()`` reads every form of pglogic's one filter language, as Python does.

``"filters"`` may now be one filter or a list of them, each a ``"key=value"`` / ``"key>=value"``
text (``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``; a text starting with ``{`` is a JSON object),
an object the metadata contains, ``{"contains": {...}}`` or ``{"key": KEY, "op": OP, "value":
VALUE}`` (``pglogic.engine.filters.parse_filters``). Before, only a list of the last two was
taken: ``"places=usa"`` and ``{"places": ["usa"]}`` were refused. The new
``pglogic._parse_filters`` reads them into the explicit forms, with Python's refusals word for
word (``pglogic._json_kind`` names what a value is); ``pglogic._filters_sql`` (arguments and
result unchanged) calls it, and its statements and parameters stay the same.

Applies ``versions/sql/0023_search.sql``; downgrading restores 0022's ``pglogic._filters_sql``
and drops the two new functions.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-29
"""

from __future__ import annotations

from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

#: Code one revision older works with a database at this revision, and the reverse: the
#: Python search writes the explicit forms, which both revisions read the same way.
COMPATIBLE_WITH_PREVIOUS = True

#: The functions this revision adds (pglogic has no overloads: a name is a function).
NEW = ["_parse_filters", "_json_kind"]


def upgrade() -> None:
    op.run_sql_file("0023_search.sql")
    op.run_sql(
        "INSERT INTO pglogic.schema_compat VALUES "
        f"('{revision}', '{down_revision if COMPATIBLE_WITH_PREVIOUS else revision}');"
    )


def downgrade() -> None:
    op.run_sql(f"DELETE FROM pglogic.schema_compat WHERE revision = '{revision}';")
    op.restore_sql_file("0023_search.sql")
    op.run_sql("\n".join(f"DROP FUNCTION IF EXISTS pglogic.{name};" for name in reversed(NEW)))
