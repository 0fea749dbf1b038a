"""AI Platform (`ml.v1`) training jobs, from a submission to a running job and back:

- pure parts (no I/O; import-linter's ``jobs-pure`` contract): a submission as every face fills it
  (`submission`, with the options' table `options`), the job model (`model`, read by Google's own
  schemas in `schema`), machine types and accelerators (`machines`, `defaults`), the plan of a
  submission (`plan`), hyperparameter specs (`hptuning`), listings and tables (`listing`,
  `tables`), package URIs and delivery (`package_uri`, `package_delivery`);
- `service`: what every face (REST, widgets, the kubectl plugin, the notebook client) calls;
- `backend`: the one interface of the runtimes, each in its package:
  `kube` (pure translations to Kubeflow Training Operator jobs and Katib Experiments: `kube.kubeflow`,
  `kube.katib`, `kube.native_experiment`, `kube.pod_guard`; pure readers of their status:
  `kube.status`, `kube.sweep_status`, `kube.metric_reports`; and the I/O: `kube.backend` with
  `kube.pods`, `kube.sweeps`, `kube.package`) and `local` (`local.backend` with `local.procs`,
  `local.store`, `local.sweeps`, `local.sweep_space`, `local.env`, `local.package`); `dry_run`
  answers the manifests a submission would make, creating nothing (``--dry-run``);
- package I/O: `package` builds a ``--package-path``, `fetch` moves packages to and from object
  storage (also run in a job's pod as ``python -m server_ext.jobs.fetch``).
"""
