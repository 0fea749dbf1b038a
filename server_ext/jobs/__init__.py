"""AI Platform (`ml.v1`) training jobs, from a Job document to a running job and back:

- pure parts: the job model (`model`, read by Google's own schemas in `schema`), machine types and
  accelerators (`machines`, `defaults`), the plan of a submission (`plan`), its translation to
  Kubeflow Training Operator jobs and Katib Experiments (`kubeflow`, `katib`, `native_experiment`,
  `hptuning`, `local_sweep_space`), what a pod may not ask for (`pod_guard`), states, metrics and
  listings (`status`, `sweep_status`, `metric_reports`, `listing`, `tables`), package URIs
  (`package_uri`);
- `service`: what every face (REST, widgets, the kubectl plugin) calls;
- `backend`: the one interface of the two runtimes, `kube_backend` (with `kube_pods`,
  `kube_sweeps`, `kube_package`) and `local_backend` (with `local_procs`, `local_store`,
  `local_sweeps`, `local_env`, `local_package`);
- packages: `package` builds a ``--package-path``, `fetch` moves packages to and from object
  storage (also run in a job's pod as ``python -m server_ext.jobs.fetch``).
"""
