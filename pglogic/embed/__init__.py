"""Embedding providers behind one small interface (:class:`~pglogic.embed.base.Embedder`).

The registry (:mod:`pglogic.embed.registry`) names models by spec and loads them on first use;
each provider module imports its ML framework only when a model of it is loaded.

Example:
    >>> from pglogic.embed.registry import parse_spec
    >>> parse_spec("all-MiniLM-L6-v2").provider
    'st'
"""
