"""``pglogic.search()`` takes ``"passage_score": "blend-not-or"``, its new default, as the
Python search.

Applies ``versions/sql/0013_search.sql``, the frozen text of ``sql/search.sql`` at this revision
(every statement in it is idempotent). The change, from ``bench/results/family_losses.md`` (the
own vector in disjunctions is what both folds that see every family chose; its weight is the
Stack Exchange fold's):

- the option ``"passage_score"`` takes ``"blend-not-or"``, now the default when the option is
  absent or null (``"blend-not"``, ``"max"`` and ``"blend"`` as before; anything else is
  refused with the Python error's text). It is ``"blend-not"`` and, in a formula with neither
  a negated-only term nor an AND phrase (``pglogic._and_texts`` empty: a disjunction, or one
  term), each text's similarity is 0.9 of its best passage's and 0.1 of the document's own
  vector's (``pglogic.engine.conjunction.own_weights``). Stack Exchange's ``OR`` queries ranked
  below one vector per document without it.

Each statement is ``pglogic.engine.compile._passage_sims``'s, text for text. No function
changes its arguments or result type; no function is added.

Downgrading applies 0012's ``0012_search.sql`` again (the default is then ``"blend-not"``;
``"blend-not-or"`` is refused).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27
"""

from __future__ import annotations

from pathlib import Path

from alembic import context, op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def _frozen(name: str) -> str:
    return (Path(__file__).with_name("sql") / name).read_text(encoding="utf-8")


def _run(script: str) -> None:
    if context.is_offline_mode():  # pglogic db sql: the script as it is, for psql
        context.static_output(script.strip())
        return
    # Straight to the driver: the function bodies hold '%' (RAISE, format), not bind parameters.
    op.get_bind().exec_driver_sql(script, execution_options={"no_parameters": True})


def upgrade() -> None:
    _run(_frozen("0013_search.sql"))


def downgrade() -> None:
    _run(_frozen("0012_search.sql"))
