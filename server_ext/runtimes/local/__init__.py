"""The local `JobBackend`: jobs and sweeps as local processes, their records in SQLite."""
