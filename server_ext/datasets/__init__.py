"""Datasets: the program that fills a dataset PVC from object storage.

- `load`: ``python -m server_ext.datasets.load --source s3://bucket/prefix --dest DIR`` copies every
  object under a prefix into a directory, resumably, printing its progress as JSON lines. The
  operator's dataset controller (`hub_ext.operator.dataset_controller`) runs it in a loader Job
  with the PVC mounted at DIR and reads those lines back from the pod's log. Its parts:
  `load_plan` (the decisions, pure), `load_dir` (DIR's manifest and pruning), `load_storage`
  (listing and copying objects).
"""
