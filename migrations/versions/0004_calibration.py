"""Stored calibrations: ``pglogic.calibration`` and the truth maps sigmoid / calibrated in SQL.

Creates the table ``pglogic.calibration``: the fitted parameters of ITLR's truth map
σ((s − τ)·λ) per embedding model (``corpus_id`` NULL) or per corpus, one row per
(model, corpus_id) (``NULLS NOT DISTINCT``, PostgreSQL >= 15), written by
``pglogic calibrate ... --save`` (:mod:`pglogic.store.calibration_store`). Readers
(``pglogic_reader``) may SELECT it.

Then applies ``versions/sql/0004_search.sql``, the statements of ``sql/search.sql`` this revision changed (each idempotent), so that ``pglogic.search()`` accepts
``"truth": "sigmoid:TAU:LAMBDA"`` and ``"truth": "calibrated"`` (new helper
``pglogic._float_text``; new bodies of ``_resolve_truth``, ``_score_sql``, ``_plan``).
Downgrading restores 0003's text of those statements and drops the helper and the table.

Squashed: its SQL is part of ``versions/sql/0017_search.sql`` (revision 0017's squash of the
deltas of 0002 to 0017); this revision keeps only its table changes, so a database at it still
upgrades, and no database is migrated to it any more (only through it, or down to 0001 or base).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-06
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

#: The revision whose frozen SQL holds this one's (no database is migrated to this one).
SQUASHED_INTO = "0017"

CREATE_TABLE = """
CREATE TABLE pglogic.calibration (
    model       text NOT NULL CHECK (btrim(model) <> ''),
    corpus_id   integer REFERENCES pglogic.corpora(id) ON DELETE CASCADE,
    tau         double precision NOT NULL
                CHECK (tau NOT IN ('Infinity', '-Infinity', 'NaN')),
    lam         double precision NOT NULL
                CHECK (lam > 0 AND lam NOT IN ('Infinity', 'NaN')),
    method      text NOT NULL CHECK (method IN ('logistic', 'corpus')),
    source      text,
    n_pairs     integer CHECK (n_pairs >= 0),
    auc         double precision CHECK (auc BETWEEN 0 AND 1),
    fitted_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT calibration_model_corpus_key UNIQUE NULLS NOT DISTINCT (model, corpus_id)
);
COMMENT ON TABLE pglogic.calibration IS
    'Fitted parameters of the truth map sigmoid((s - tau) * lam) per embedding model (corpus_id '
    'NULL) or per corpus; pglogic.search(..., ''{"truth": "calibrated"}'') uses the corpus row, '
    'else the model row';
DO $do$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pglogic_reader') THEN
        GRANT SELECT ON pglogic.calibration TO pglogic_reader;
    END IF;
END
$do$;
"""


def upgrade() -> None:
    op.run_sql(CREATE_TABLE)


def downgrade() -> None:
    op.keep_rows(
        "pglogic.calibration",
        "stored calibrations (pglogic calibration list); delete them first to downgrade further",
    )
    op.run_sql("DROP FUNCTION IF EXISTS pglogic._float_text(double precision);")
    op.run_sql("DROP TABLE IF EXISTS pglogic.calibration;")
