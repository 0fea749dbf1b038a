"""Local-tier fixtures shared across modules: the real object stores of `tests.local.object_stores`."""

from tests.local.object_stores import gcs_store, s3_store  # noqa: F401  (fixtures, registered here once)
