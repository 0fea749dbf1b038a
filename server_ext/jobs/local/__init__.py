"""The jobs code of the local runtime: jobs and sweeps as local processes, their records on disk
and the environment they run in.
"""
