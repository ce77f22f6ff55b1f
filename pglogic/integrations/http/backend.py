"""What the HTTP server runs on: the configuration and a :class:`~pglogic.api.PgLogic` per process.

The server searches through its own :class:`~pglogic.api.PgLogic`, whose pooled connections
are read-only: every transaction is ``READ ONLY`` and, where the login role may take it, runs
as the ``pglogic_reader`` role (``SET ROLE`` through the connection's startup options), so the
HTTP process can read corpora, the term cache and calibrations but cannot change anything. The
schema is checked (and, on the embedded server, migrated) once, before, with the login role.

Example:
    >>> cfg = ServeConfig(pool_size=4)
    >>> cfg.host, cfg.port, cfg.timeout
    ('127.0.0.1', 8000, 10.0)
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pglogic.errors import DatabaseUnavailable

if TYPE_CHECKING:
    from pglogic.api import PgLogic
    from pglogic.integrations.http.keys import KeyStore

__all__ = ["READER_ROLE", "Backend", "ServeConfig", "reader_dsn"]

READER_ROLE = "pglogic_reader"


@dataclass(frozen=True)
class ServeConfig:
    """How ``pglogic serve`` runs.

    ``timeout`` is the longest a search may run on the server (seconds; a request may ask for
    less); ``max_body`` the largest request body (bytes); ``max_k`` the most hits a request may
    ask for. ``keys_file`` holds the API keys (hashes): a client that is not on this machine
    must send one (``Authorization: Bearer KEY`` or ``X-API-Key: KEY``), any client when
    ``require_key``. ``cors_origins`` are the origins allowed to call the API from a browser
    (none by default). ``reader``: run as the read-only ``pglogic_reader`` role when possible.

    Example:
        >>> ServeConfig(cors_origins=("https://app.example",)).cors_origins
        ('https://app.example',)
    """

    dsn: str | None = None
    home: Path | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    pool_size: int = 8
    pool_timeout: float = 10.0
    timeout: float = 10.0
    max_body: int = 64 * 1024
    max_k: int = 200
    max_query: int = 2000
    keys_file: Path | None = None
    require_key: bool = False
    cors_origins: tuple[str, ...] = ()
    reader: bool = True
    llm_env: dict[str, str] | None = field(default=None, repr=False)


def reader_dsn(dsn: str, *, role: str | None) -> str:
    """``dsn`` with startup options that make every transaction read-only (and ``SET ROLE
    role``), keeping options the DSN already has.

    Example:
        >>> reader_dsn("dbname=x", role="pglogic_reader")
        "dbname=x options='-c default_transaction_read_only=on -c role=pglogic_reader'"
    """
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    options = str(conninfo_to_dict(dsn).get("options") or "")
    extra = "-c default_transaction_read_only=on"
    if role is not None:
        extra += f" -c role={role}"
    return make_conninfo(dsn, options=f"{options} {extra}".strip())


class Backend:
    """The configuration, the key store and the (read-only) :class:`PgLogic` of one server,
    opened on first use and closed by :meth:`close`.

    Example:
        >>> Backend(ServeConfig()).read_only  # doctest: +SKIP
        True
    """

    def __init__(self, config: ServeConfig, keys: KeyStore | None = None) -> None:
        self.config = config
        self.keys = keys
        self._api: PgLogic | None = None
        self._lock = threading.Lock()
        self.role: str | None = None
        self.read_only = False

    @property
    def api(self) -> PgLogic:
        """The :class:`PgLogic` searches run on (made on first use)."""
        if self._api is None:
            with self._lock:
                if self._api is None:
                    self._api = self._open()
        return self._api

    def _open(self) -> PgLogic:
        from pglogic.api import PgLogic
        from pglogic.store.db import connect

        cfg = self.config
        admin = PgLogic(cfg.dsn, home=cfg.home)
        dsn = admin.dsn
        if not cfg.reader:
            return PgLogic(dsn, pool_size=cfg.pool_size, pool_timeout=cfg.pool_timeout)
        with admin.connect() as conn:  # checks (embedded: migrates) the schema as the login role
            row = conn.execute(
                "SELECT CASE WHEN to_regrole(%s) IS NULL THEN false "
                "ELSE pg_has_role(current_user, %s, 'MEMBER') END",
                (READER_ROLE, READER_ROLE),
            ).fetchone()
        role = READER_ROLE if row and row[0] else None
        api = PgLogic(
            reader_dsn(dsn, role=role), pool_size=cfg.pool_size, pool_timeout=cfg.pool_timeout
        )
        try:
            with connect(api.dsn) as conn:
                conn.execute("SELECT 1")
        except DatabaseUnavailable:
            api = PgLogic(reader_dsn(dsn, role=None), pool_size=cfg.pool_size,
                          pool_timeout=cfg.pool_timeout)  # fmt: skip
            role = None
        self.role = role
        self.read_only = True
        return api

    def close(self) -> None:
        """Close the connection pool (a new one opens on the next use).

        Example:
            >>> Backend(ServeConfig()).close()
        """
        with self._lock:
            api, self._api = self._api, None
        if api is not None:
            api.close()

    def llm_config(self) -> Any:
        """The LLM endpoint from the environment (``PGLOGIC_LLM_BASE_URL``...), or a
        :class:`~pglogic.errors.ConfigError` when none is configured.

        Example:
            >>> Backend(ServeConfig(llm_env={})).llm_config()
            Traceback (most recent call last):
            ...
            pglogic.errors.ConfigError: No LLM endpoint configured: set PGLOGIC_LLM_BASE_URL to an OpenAI-compatible API (e.g. http://127.0.0.1:8080/v1) and PGLOGIC_LLM_MODEL, or OPENAI_API_KEY for OpenAI
        """
        from pglogic.llm.client import LLMConfig

        return LLMConfig.resolve(env=self.config.llm_env)

    def llm_configured(self) -> bool:
        """Whether :meth:`llm_config` finds an endpoint.

        Example:
            >>> Backend(ServeConfig(llm_env={})).llm_configured()
            False
        """
        from pglogic.errors import ConfigError

        try:
            self.llm_config()
        except ConfigError:
            return False
        return True
