"""Login settings and claim paths, decided without I/O (contract ``login-rules-pure``)."""
