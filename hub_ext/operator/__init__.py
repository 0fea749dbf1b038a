"""`mlplatform operator`: the platform's cluster side, on kopf.

- `settings`: what the operator is told (flags), as one frozen `OperatorSettings`;
- `context`: what its handlers share (settings, the Kubernetes client, the leader elector);
- `leader`: leader election on a coordination.k8s.io Lease, so two replicas are safe: every replica
  serves the webhooks, only the leader runs the dataset controller;
- `tls`: the webhook server's certificate: cert-manager's files, or a self-signed bootstrap kept in
  a Secret, rotated and reloaded without a restart;
- `health`: /healthz, /readyz and /metrics;
- `admission` (pure) and `webhooks`: the credential Secret validator and the pod credential mounter;
- `datasets` (pure) and `dataset_controller`: the loader Jobs that fill dataset PVCs from S3/GCS and
  the conditions and progress they report (its reads and writes: `dataset_api`; the progress of
  running loads: `dataset_progress`);
- `main`: the command, which wires them into one kopf operator.
"""
