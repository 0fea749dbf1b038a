"""The platform's model, shared by the hub and the notebook side. Pure: parsed once from
configuration into frozen objects (the accelerator catalogue, profiles, entitlements, mounts,
credentials, datasets, quantities, names) and the one exception tree; no I/O, no Kubernetes client,
nothing of the hub's or the notebook's runtimes (import-linter contract ``pure``)."""
