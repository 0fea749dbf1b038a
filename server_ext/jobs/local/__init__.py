"""Jobs on the local runtime, decided (pure): what each process of a local job gets (`env`).
`server_ext.runtimes.local` runs them (a sweep's Optuna search space, bound to Optuna's own
objects, is `server_ext.runtimes.local.sweep_space`).
"""
