"""Tree -> statement: fuzzy operators, plans, the compiler, rendering, guide, NSFL and SQO.

Pure: no I/O, no database connection, no embedding model. Imports only :mod:`pglogic.query`,
:mod:`pglogic.errors`, NumPy and ``psycopg.sql`` (to compose statements).

Example:
    >>> from pglogic.engine.operators import DEFAULT_FAMILY
    >>> DEFAULT_FAMILY
    'product-max-strong'
"""
