"""The kept database of the real corpora: ``bench_quality``, where ``bench/quality/quality.py`` loads each
shared dataset as corpus ``eval_<dataset>`` (so later runs, and every benchmark on the real corpora,
embed nothing again), and which dataset each supervised calibration is fitted on.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

from pglogic.store import migrate

DATABASE = "bench_quality"


#: The supervised calibration of each dataset is fitted on another one (never on its own labels).
FIT_FROM = {
    "reuters21578": "stackexchange_cooking_robotics",
    "stackexchange_cooking_robotics": "reuters21578",
    "arxiv_0704": "reuters21578",
    "limit_small": "reuters21578",
}


def database(dsn: str) -> str:
    """DSN of the (kept) database ``bench_quality``, created and migrated when missing."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,))
        if exists.fetchone() is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
    target = psycopg.conninfo.make_conninfo(dsn, dbname=DATABASE)
    migrate.upgrade(target)
    return target
