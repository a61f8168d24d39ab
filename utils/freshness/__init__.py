"""Revisit state in PostgreSQL as people see it (issue 31): per-crawl figures, pause, resume, drop.

Shared by `shoal revisit`, the REST gateway and the metrics; the tables are the sink's (sink/schema.py).
"""
