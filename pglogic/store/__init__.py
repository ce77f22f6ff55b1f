"""Postgres: the embedded server, connections, corpora, ingest, readers, admin, caches, search.

Everything that talks to the database lives here; statements come from :mod:`pglogic.engine`.

Example:
    >>> from pglogic.store.settings import Settings
    >>> Settings(dsn="dbname=x").resolve_dsn()
    'dbname=x'
"""
