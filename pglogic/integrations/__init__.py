"""Adapters for other libraries: the SQLAlchemy search helper and Alembic operations.

Example:
    >>> import pglogic.integrations.sqlalchemy  # doctest: +SKIP
"""
