"""Why a corpus is not partitioned per tenant (docs/scaling.md section 3): the plans that prove it.

    .venv/bin/python bench/perf/citus/partitioning.py [--dsn DSN]

On a scratch database ``citus_part_exp`` of the embedded server (or ``--dsn``'s server): a table
LIST-partitioned by a ``tenant`` column (4 partitions, 8,000 rows of 16-d vectors), one HNSW
index per partition (one ``CREATE INDEX`` on the parent), then ``EXPLAIN`` of pglogic's
statement shape (a candidate CTE, then the late fetch by id) with the tenant given three ways.
Also the two DDL errors that decide the layout. Writes ``bench/perf/results/citus_partitioning.md``.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg.types.json import Jsonb

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository root: bench.lib
from bench.lib import provenance
from bench.lib.benchlib import DEFAULT_HOME, server_dsn

RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"  # bench/perf/results

DB = "citus_part_exp"
TENANTS = ["acme", "globex", "initech", "other"]
SHAPES = {
    "the tenant as a metadata filter (what pglogic compiles today)": (
        'd.metadata @> \'{"tenant": "acme"}\'',
        "",
    ),
    "a tenant column in the candidate CTE only (extra_where)": ("d.tenant = 'acme'", ""),
    "a tenant column in the CTE and in the late fetch": (
        "d.tenant = 'acme'",
        " AND d.tenant = 'acme'",
    ),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default=None)
    args = ap.parse_args()
    base = server_dsn(DEFAULT_HOME, args.dsn)
    with psycopg.connect(base, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {DB}")
    dsn = psycopg.conninfo.make_conninfo(base, dbname=DB)
    out = ["# Partitioning a corpus per tenant: the plans (`bench/perf/citus/partitioning.py`)", ""]
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CREATE EXTENSION vector")
        register_vector(c)

        def error(stmt: str) -> str:
            try:
                c.execute(stmt)
            except psycopg.Error as exc:
                return str(exc).splitlines()[0]
            return "(accepted)"

        out += [
            "DDL that decides the layout (PostgreSQL 17):",
            "",
            "- partition key = a generated column `tenant text GENERATED ALWAYS AS "
            "(metadata->>'tenant') STORED`: `"
            + error(
                "CREATE TABLE g (id bigint GENERATED ALWAYS AS IDENTITY, metadata jsonb,"
                " tenant text GENERATED ALWAYS AS (metadata->>'tenant') STORED)"
                " PARTITION BY LIST (tenant)"
            )
            + "`",
            "- `UNIQUE (external_id)` on a table partitioned by tenant: `"
            + error(
                "CREATE TABLE u (id bigint GENERATED ALWAYS AS IDENTITY, tenant text NOT NULL,"
                " external_id text NOT NULL UNIQUE) PARTITION BY LIST (tenant)"
            )
            + "`",
            "",
        ]
        c.execute(
            "CREATE TABLE p (tenant text NOT NULL, id bigint GENERATED ALWAYS AS IDENTITY,"
            " external_id text NOT NULL, metadata jsonb NOT NULL, embedding vector(16),"
            " PRIMARY KEY (tenant, id), UNIQUE (tenant, external_id)) PARTITION BY LIST (tenant)"
        )
        for t in TENANTS[:-1]:
            c.execute(f"CREATE TABLE p_{t} PARTITION OF p FOR VALUES IN ('{t}')")
        c.execute("CREATE TABLE p_rest PARTITION OF p DEFAULT")
        rng = np.random.default_rng(0)
        with c.cursor().copy("COPY p (tenant, external_id, metadata, embedding) FROM STDIN") as cp:
            for i in range(8000):
                t = TENANTS[i % 4]
                cp.write_row((t, f"d{i}", Jsonb({"tenant": t}), rng.standard_normal(16)))
        c.execute("CREATE INDEX ON p USING hnsw (embedding vector_cosine_ops)")
        c.execute("ANALYZE p")
        idx = [r[0] for r in c.execute(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
            " JOIN pg_am a ON a.oid = c.relam WHERE a.amname = 'hnsw' ORDER BY 1"
        )]  # fmt: skip
        out += [f"One `CREATE INDEX ... USING hnsw` on the parent made: {', '.join(idx)}.", ""]
        v = rng.standard_normal(16).astype(np.float32)
        for title, (cte_where, join_extra) in SHAPES.items():
            stmt = (
                "EXPLAIN (COSTS OFF) WITH c0 AS MATERIALIZED (SELECT d.id FROM p d WHERE "
                + cte_where
                + " ORDER BY d.embedding <=> %s LIMIT 10)"
                " SELECT d.external_id FROM c0 JOIN p d ON d.id = c0.id" + join_extra
            )
            plan = "\n".join(r[0] for r in c.execute(stmt, (v,)))
            plan = re.sub(r"'\[[-0-9.e,]+\]'", "'[…]'", plan)
            out += [f"## {title}", "", "```text", plan, "```", ""]
    with psycopg.connect(base, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    md = provenance.stamp("\n".join(out), provenance.current())
    (RESULTS_DIR / "citus_partitioning.md").write_text(md.rstrip() + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
