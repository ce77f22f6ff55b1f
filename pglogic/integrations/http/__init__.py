"""The HTTP server of ``pglogic serve``: a versioned JSON API and the playground page.

:func:`create_app` builds the ASGI application (FastAPI on Starlette; ``uvicorn`` serves it) from a
:class:`ServeConfig`. The API runs :class:`pglogic.PgLogic` underneath, on read-only pooled
connections; see ``docs/http.md``.

Example:
    >>> from pglogic.integrations.http import ServeConfig, create_app  # doctest: +SKIP
    >>> app = create_app(ServeConfig(pool_size=4))  # doctest: +SKIP
"""

from pglogic.integrations.http.app import create_app
from pglogic.integrations.http.backend import ServeConfig

__all__ = ["ServeConfig", "create_app"]
