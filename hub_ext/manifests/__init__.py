"""The platform's Kubernetes objects as plain dicts, built and read. Pure: a project's
tenancy objects, the pod volumes of credentials and datasets, capacity from nodes and pods, a
team's membership, spawn progress from Events; no I/O (import-linter contract ``pure``); the
`hub_ext.kube` room applies them."""
