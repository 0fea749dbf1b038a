"""Jobs on Kubernetes, decided (pure): a plan as Kubeflow Training Operator jobs or a ``batch/v1``
Job (`kubeflow`) and as a Katib Experiment (`katib`, `native_experiment`), what a project's pod may
not ask for (`pod_guard`), and their status read back (`status`, `sweep_status`, `waiting`,
`metric_reports`). `server_ext.runtimes.kube` applies them to a cluster.
"""
