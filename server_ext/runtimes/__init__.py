"""Where a job runs: the Kubernetes backend (`kube`), the local one (`local`), the dry run, and
fetching and building code packages. The I/O half of jobs; the decisions are `server_ext.jobs`'s
(pure). Imports no service and no face."""
