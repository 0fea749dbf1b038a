"""AI Platform (`ml.v1`) training jobs: the job model (`model`, read by Google's own schemas in
`schema`), machine types and accelerators (`machines`); to come: translation to Kubeflow, the
backends, REST and the kubectl plugin."""
