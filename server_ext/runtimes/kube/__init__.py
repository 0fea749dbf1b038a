"""The Kubernetes `JobBackend`: applies the pure translations of `server_ext.jobs.kube`."""
