"""The jobs code of the Kubernetes runtime: the Kubeflow and Katib translations (pure), their
status readers (pure) and the backend that applies them to a cluster (I/O).
"""
