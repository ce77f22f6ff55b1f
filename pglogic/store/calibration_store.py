"""Stored calibrations (``pglogic.calibration``, migration 0004): truth maps fitted once, used by name.

:mod:`pglogic.eval.calibrate` fits ITLR's truth map σ((s − τ)·λ) for an embedding model; this module
keeps the fitted parameters in the database, per model (``corpus_id`` NULL: every corpus of the
model) or per corpus, so that a search can ask for ``truth="calibrated"``. A corpus uses its own
row when it has one, else its model's row (:func:`load_calibration`); the SQL function
``pglogic.search()`` applies the same rule. :func:`resolve_stored_truth` turns ``"calibrated"``
into the spec ``sigmoid:TAU:LAMBDA`` of the stored parameters (the Python searches call it
first), with the floats written by ``repr`` so that the map is exactly the stored one.

Example:
    >>> cal = Calibration(tau=0.19, lam=18.8, method="logistic", n_pairs=550, auc=0.93)
    >>> save_calibration(conn, "all-MiniLM-L6-v2", cal, source="reuters21578")  # doctest: +SKIP
    >>> resolve_stored_truth(conn, get_corpus(conn, "news"), "calibrated")  # doctest: +SKIP
    'sigmoid:0.19:18.8'
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import errors, sql

from pglogic.engine.calibration import Calibration
from pglogic.engine.source import Corpus
from pglogic.errors import ConfigError, InvalidInput, UnknownCorpus
from pglogic.store.db import Connection

__all__ = [
    "CALIBRATED",
    "StoredCalibration",
    "check_target",
    "delete_calibration",
    "list_calibrations",
    "load_calibration",
    "missing_calibration_message",
    "resolve_stored_truth",
    "save_calibration",
    "truth_spec",
]

#: The truth-map name that means "the parameters stored for the corpus".
CALIBRATED = "calibrated"

TABLE = sql.Identifier("pglogic", "calibration")
_COLUMNS = sql.SQL("cl.tau, cl.lam, cl.method, cl.n_pairs, cl.auc")


@dataclass(frozen=True)
class StoredCalibration:
    """One row of ``pglogic.calibration``: parameters, for whom, from what, when.

    ``corpus`` is the corpus's name, or None for a model-wide row.

    Example:
        >>> cal = Calibration(0.2, 10.0, "corpus", 0, None)
        >>> row = StoredCalibration("m", None, cal, "news", datetime(2026, 1, 1))
        >>> row.truth
        'sigmoid:0.2:10.0'
    """

    model: str
    corpus: str | None
    calibration: Calibration
    source: str | None
    fitted_at: datetime

    @property
    def truth(self) -> str:
        """The truth-map spec of the parameters (:func:`truth_spec`)."""
        return truth_spec(self.calibration)


def truth_spec(cal: Calibration) -> str:
    """The ``--truth`` spec ``sigmoid:TAU:LAMBDA`` of ``cal``, floats written by ``repr``.

    ``pglogic.engine.operators.resolve_truth`` reads it back to exactly the same two floats.

    Example:
        >>> truth_spec(Calibration(0.1857, 18.76, "logistic", 100, 0.9))
        'sigmoid:0.1857:18.76'
        >>> truth_spec(Calibration(1e-05, 123456789.5, "corpus", 0, None))
        'sigmoid:1e-05:123456789.5'
    """
    return f"sigmoid:{float(cal.tau)!r}:{float(cal.lam)!r}"


def _calibration(row: tuple[Any, ...]) -> Calibration:
    tau, lam, method, n_pairs, auc = row
    return Calibration(float(tau), float(lam), str(method), int(n_pairs or 0), auc)


def check_target(conn: Connection, model: str, corpus_id: int | None = None) -> None:
    """Raise unless parameters of ``model`` can be stored for ``corpus_id`` (None: model-wide).

    The model must be a non-blank name; a corpus must exist and have an embedding of ``model``
    (active or not: a calibration may be stored before switching models).

    Example:
        >>> check_target(conn, "all-MiniLM-L6-v2", corpus_id=1)  # doctest: +SKIP
    """
    if not model.strip():
        raise InvalidInput("A calibration needs a model name")
    if corpus_id is None:
        return
    row = conn.execute(
        "SELECT c.name, array_agg(e.model ORDER BY e.id) FILTER (WHERE e.model IS NOT NULL)"
        " FROM pglogic.corpora c LEFT JOIN pglogic.embeddings e ON e.corpus_id = c.id"
        " WHERE c.id = %s GROUP BY c.name",
        (corpus_id,),
    ).fetchone()
    if row is None:
        raise UnknownCorpus(f"No corpus with id {corpus_id}")
    name, models = row[0], list(row[1] or [])
    if model not in models:
        have = ", ".join(repr(m) for m in models) or "none"
        raise InvalidInput(
            f"Corpus {name!r} has no embedding of model {model!r} (it has: {have}); "
            "a calibration is fitted for one model"
        )


def save_calibration(
    conn: Connection,
    model: str,
    cal: Calibration,
    *,
    corpus_id: int | None = None,
    source: str | None = None,
) -> None:
    """Store ``cal`` for ``model`` (``corpus_id`` None: for every corpus of the model) and commit.

    Replaces the row of the same model and corpus (upsert; ``fitted_at`` becomes now). Commits
    the connection's transaction, like :func:`pglogic.store.term_cache.cache_terms`. ``source`` says
    where the fit came from (a dataset's name, ``corpus news``, ...).

    Raises:
        InvalidInput: blank model, or the corpus has no embedding of ``model``.
        UnknownCorpus: no corpus has id ``corpus_id``.

    Example:
        >>> cal = Calibration(0.19, 18.8, "logistic", 550, 0.93)
        >>> save_calibration(conn, "all-MiniLM-L6-v2", cal, source="reuters21578")  # doctest: +SKIP
        >>> save_calibration(conn, "all-MiniLM-L6-v2", cal, corpus_id=1)  # doctest: +SKIP
    """
    stmt = sql.SQL(
        "INSERT INTO {} (model, corpus_id, tau, lam, method, source, n_pairs, auc)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
        " ON CONFLICT (model, corpus_id) DO UPDATE SET tau = EXCLUDED.tau, lam = EXCLUDED.lam,"
        " method = EXCLUDED.method, source = EXCLUDED.source, n_pairs = EXCLUDED.n_pairs,"
        " auc = EXCLUDED.auc, fitted_at = now()"
    ).format(TABLE)
    with conn.transaction():
        check_target(conn, model, corpus_id)
        try:
            conn.execute(
                stmt,
                (model, corpus_id, float(cal.tau), float(cal.lam), cal.method, source,
                 int(cal.n_pairs), cal.auc),
            )  # fmt: skip
        except errors.ForeignKeyViolation:  # the corpus was dropped meanwhile
            raise UnknownCorpus(f"No corpus with id {corpus_id}") from None
    if not conn.autocommit:
        conn.commit()


def load_calibration(conn: Connection, corpus: Corpus) -> Calibration | None:
    """The calibration ``corpus`` uses: its own row, else its model's row, else None.

    Only rows of the corpus's active model count (a corpus that switched models needs a fit of
    the new one). Leaves the connection's transaction state as it was.

    Example:
        >>> load_calibration(conn, get_corpus(conn, "news"))  # doctest: +SKIP
        Calibration(tau=0.19, lam=18.8, method='logistic', n_pairs=550, auc=0.93)
    """
    stmt = sql.SQL(
        "SELECT {} FROM {} cl WHERE cl.model = %s AND (cl.corpus_id = %s OR cl.corpus_id IS NULL)"
        " ORDER BY cl.corpus_id NULLS LAST LIMIT 1"
    ).format(_COLUMNS, TABLE)
    with conn.transaction():
        row = conn.execute(stmt, (corpus.model, corpus.id)).fetchone()
    return None if row is None else _calibration(row)


def list_calibrations(conn: Connection) -> list[StoredCalibration]:
    """Every stored calibration, by model, the model-wide row first, then by corpus name.

    Example:
        >>> [(c.model, c.corpus, c.truth) for c in list_calibrations(conn)]  # doctest: +SKIP
        [('all-MiniLM-L6-v2', None, 'sigmoid:0.19:18.8'), ('all-MiniLM-L6-v2', 'news', ...)]
    """
    stmt = sql.SQL(
        "SELECT cl.model, co.name, {}, cl.source, cl.fitted_at FROM {} cl"
        " LEFT JOIN pglogic.corpora co ON co.id = cl.corpus_id"
        " ORDER BY cl.model, co.name NULLS FIRST"
    ).format(_COLUMNS, TABLE)
    rows = conn.execute(stmt).fetchall()
    return [StoredCalibration(r[0], r[1], _calibration(r[2:7]), r[7], r[8]) for r in rows]


def delete_calibration(conn: Connection, model: str, corpus_id: int | None = None) -> bool:
    """Delete the row of ``model`` for ``corpus_id`` (None: the model-wide row) and commit.

    Returns whether a row was deleted. Rows of single corpora stay when the model-wide row
    goes (and are deleted with their corpus).

    Example:
        >>> delete_calibration(conn, "all-MiniLM-L6-v2")  # doctest: +SKIP
        True
    """
    stmt = sql.SQL(
        "DELETE FROM {} WHERE model = %s AND corpus_id IS NOT DISTINCT FROM %s::integer"
    ).format(TABLE)
    with conn.transaction():
        deleted = conn.execute(stmt, (model, corpus_id)).rowcount
    if not conn.autocommit:
        conn.commit()
    return deleted > 0


def missing_calibration_message(corpus: Corpus) -> str:
    """The error text when ``corpus`` has no stored calibration (``pglogic.search()`` says the same).

    Example:
        >>> print(missing_calibration_message(
        ...     Corpus(1, "news", "corpus_1", "m", 3, "cosine", "embedding", None, None)))
        No calibration stored for corpus 'news' (model 'm'): run 'pglogic calibrate DATASET --save' \
(labelled data) or 'pglogic calibrate --from-corpus news --save' first, or give truth sigmoid:TAU:LAMBDA
    """
    return (
        f"No calibration stored for corpus {corpus.name!r} (model {corpus.model!r}): run "
        "'pglogic calibrate DATASET --save' (labelled data) or "
        f"'pglogic calibrate --from-corpus {corpus.name} --save' first, or give truth "
        "sigmoid:TAU:LAMBDA"
    )


def resolve_stored_truth(conn: Connection, corpus: Corpus, truth: str) -> str:
    """``truth`` unchanged, unless it is ``calibrated``: then the spec of the stored parameters.

    Raises:
        ConfigError: ``calibrated`` and nothing is stored for the corpus or its model.

    Example:
        >>> resolve_stored_truth(None, None, "clamp")  # other maps: no database access
        'clamp'
        >>> resolve_stored_truth(conn, news, "Calibrated")  # doctest: +SKIP
        'sigmoid:0.19:18.8'
    """
    if not isinstance(truth, str) or truth.strip().lower() != CALIBRATED:
        return truth
    cal = load_calibration(conn, corpus)
    if cal is None:
        raise ConfigError(missing_calibration_message(corpus))
    return truth_spec(cal)
