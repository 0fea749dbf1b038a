"""How a built ``--package-path`` sdist reaches its job: limits, names and layouts. Pure.

The I/O half (building the sdist, reading it, uploading it) is `server_ext.runtimes.package`; the
URIs these names make are read back by `server_ext.jobs.package_uri` (and fetched by
`server_ext.runtimes.fetch`).

- `choose_delivery(size, limit, staging_bucket)`: ``"configmap"`` when the sdist fits in a
  ConfigMap (`CONFIGMAP_LIMIT`, ~900 KiB: Kubernetes caps a ConfigMap's data at 1 MiB, and the
  base64 text must also fit etcd's 1.5 MiB request limit), else ``"bucket"`` when a staging
  bucket is set, else `UserInputError`. A ConfigMap needs no credentials and is
  garbage-collected with the job, so it is preferred even when a bucket is given.
- `package_configmap(...)`: the ConfigMap, owned by the job object (create the job first, then
  this; the job's pods wait for it to appear), ``immutable`` (its bytes cannot be changed in
  place; deleted and recreated, they no longer match the digest the job recorded), its URI
  `configmap_uri(...)` (``configmap://<name>/<file>``), which `server_ext.runtimes.fetch` copies from
  ``$MLPLATFORM_PACKAGES_DIR/<name>/<file>`` where the pod mounts it.
- `digest_env(uri, sha256)`: the fetch container's env entry recording the package's digest
  (`server_ext.jobs.package_uri.DIGESTS_ENV`), written into the job's pod template at submit, so the
  fetcher installs only the bytes that were submitted — from the ConfigMap or the staging bucket.
- `staging_uri_of(staging_bucket, job_id, sha256, filename)`: where a staged sdist goes,
  ``<staging-bucket>/<job_id>/packages/<sha256>/<file>`` (gs:// or s3://); `staging_uri` computes
  it from the bytes.
- `check_filename`, `check_staging_bucket`: the checks `plan.with_package` runs before anything
  is created.
"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Literal

from hub_ext.core.errors import UserInputError
from server_ext.jobs.package_uri import DIGESTS_ENV, digests_env

CONFIGMAP_LIMIT = 900 * 1024
MANAGED_BY = "jupyterhub-mlplatform"
JOB_LABEL = "mlplatform.io/job"
SHA256_ANNOTATION = "mlplatform.io/package-sha256"
FIELD = "package.path"  # the REST name of the shipped package's fields (the CLI says --package-path)
BUCKET_FIELD = "package.stagingBucket"
_CONFIGMAP_KEY = re.compile(r"[-._a-zA-Z0-9]+")


def choose_delivery(size: int, limit: int = CONFIGMAP_LIMIT,
                    staging_bucket: str | None = None) -> Literal["configmap", "bucket"]:
    """How an sdist of `size` bytes reaches the job: in a ConfigMap when it fits, else staged."""
    if size <= limit:
        return "configmap"
    if staging_bucket:
        return "bucket"
    raise UserInputError(FIELD, f"the package is {size / 1e6:.1f} MB, more than the {limit / 1e6:.1f} MB that "
                                "can ship inside the cluster; set --staging-bucket")


def configmap_name(plan_name: str) -> str:
    return f"{plan_name}-package"


def configmap_uri(plan_name: str, filename: str) -> str:
    return f"configmap://{configmap_name(plan_name)}/{filename}"


def configmap_name_of(uri: str) -> str:
    """The ConfigMap's name in a ``configmap://<name>/<file>`` URI."""
    return uri.removeprefix("configmap://").partition("/")[0]


def package_configmap(plan_name: str, namespace: str, sdist: bytes, filename: str, owner: dict,
                      limit: int = CONFIGMAP_LIMIT) -> dict:
    """The ConfigMap carrying `sdist` as ``binaryData[filename]``, garbage-collected with `owner`
    (the created job object's ``{apiVersion, kind, name, uid}``)."""
    check_filename(filename)
    choose_delivery(len(sdist), limit, None)
    missing = [k for k in ("apiVersion", "kind", "name", "uid") if not owner.get(k)]
    if missing:
        raise ValueError(f"owner needs {', '.join(missing)}")
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": configmap_name(plan_name),
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": MANAGED_BY, JOB_LABEL: plan_name},
            "annotations": {SHA256_ANNOTATION: hashlib.sha256(sdist).hexdigest()},
            "ownerReferences": [{k: owner[k] for k in ("apiVersion", "kind", "name", "uid")}],
        },
        "immutable": True,
        "binaryData": {filename: base64.b64encode(sdist).decode("ascii")},
    }


def digest_env(uri: str, sha256: str) -> dict:
    """The env entry (``{"name", "value"}``) that makes the fetcher check `uri`'s bytes against `sha256`."""
    # `$` doubled: Kubernetes expands $(VAR) in env values and reads $$ as $
    return {"name": DIGESTS_ENV, "value": digests_env({uri: sha256}).replace("$", "$$")}


def staging_uri(staging_bucket: str, job_id: str, sdist: bytes, filename: str) -> str:
    """``<staging-bucket>/<job_id>/packages/<sha256>/<filename>``."""
    return staging_uri_of(staging_bucket, job_id, hashlib.sha256(sdist).hexdigest(), filename)


def check_staging_bucket(staging_bucket: str) -> tuple[str, str]:
    """(scheme, bucket[/path]) of a ``gs://`` or ``s3://`` staging bucket, or `UserInputError`."""
    scheme, sep, rest = staging_bucket.partition("://")
    if scheme not in ("gs", "s3") or not sep or not rest.strip("/"):
        raise UserInputError(BUCKET_FIELD, f"{staging_bucket!r} must be gs://<bucket>[/<path>] or "
                                           "s3://<bucket>[/<path>]")
    return scheme, rest.strip("/")


def staging_uri_of(staging_bucket: str, job_id: str, sha256: str, filename: str) -> str:
    """`staging_uri` from the sdist's digest."""
    scheme, rest = check_staging_bucket(staging_bucket)
    return f"{scheme}://{rest}/{job_id}/packages/{sha256}/{filename}"


def check_filename(filename: str) -> str:
    """`filename` when it can be a ConfigMap key, else `UserInputError` (``package.path``)."""
    if not _CONFIGMAP_KEY.fullmatch(filename) or len(filename) > 253:
        raise UserInputError(FIELD, f"the sdist name {filename!r} cannot be a ConfigMap key")
    return filename
