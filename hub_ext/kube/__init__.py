"""The hub's Kubernetes I/O: the API client, watch caches, the cluster view every spawner
shares, provisioning of projects and the reconciliation of their members. Applies what
`hub_ext.manifests` builds; knows nothing of spawners or pages."""
