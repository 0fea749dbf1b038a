"""Login settings and claim paths, decided without I/O (import-linter contract ``pure``)."""
