"""Evaluation: labelled datasets, derived logical queries, metrics, baselines, calibration fits,
reports. Loaded by ``pglogic eval`` and the benchmarks only.

Example:
    >>> from pglogic.eval.metrics import METRICS
    >>> "ndcg@10" in METRICS
    True
"""
