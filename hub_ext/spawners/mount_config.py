"""The PlatformSpawner traits that say where credentials and datasets come from and where pods
see them, read into a `hub_ext.manifests.mounts.MountSettings`."""

from __future__ import annotations

from traitlets import Dict, Enum, Unicode
from traitlets.config import Configurable

from hub_ext.manifests.mounts import MountSettings


class MountConfig(Configurable):
    credential_types = Dict(
        {"gcp-credential": "gcp-credential", "aws-credential": "aws-credential"},
        help="""Secret `type` of each credential kind; Secrets of these types in a project are its credentials.

        c.PlatformSpawner.credential_types = {"gcp-credential": "example.com/gcp-sa-key",
                                              "aws-credential": "example.com/aws-keys"}""",
    ).tag(config=True)
    credentials_mount_path = Unicode(
        "/etc/mlplatform/credentials",
        help="""Where chosen credentials are mounted (one directory per credential).

        c.PlatformSpawner.credentials_mount_path = "/etc/mlplatform/credentials"
        """).tag(config=True)
    datasets_mount_path = Unicode(
        "/datasets", help="""Where chosen datasets are mounted, read-only, as <path>/<name>.

        c.PlatformSpawner.datasets_mount_path = "/datasets"
        """).tag(config=True)
    dataset_label = Unicode(
        "mlplatform.io/dataset", help="""The label (a selector) that marks a PVC as a dataset.

        c.PlatformSpawner.dataset_label = "mlplatform.io/dataset=true"
        """).tag(config=True)
    dataset_source_annotation = Unicode(
        "mlplatform.io/source", help="""The PVC annotation holding a dataset's source (s3://… or gs://…).

        c.PlatformSpawner.dataset_source_annotation = "mlplatform.io/source"
        """).tag(config=True)
    dataset_description_annotation = Unicode(
        "mlplatform.io/description", help="""The annotation holding a dataset's or credential's description.

        c.PlatformSpawner.dataset_description_annotation = "mlplatform.io/description"
        """).tag(config=True)
    when_dataset_loading = Enum(
        ["refuse", "wait"], default_value="refuse",
        help="""A chosen dataset is still loading: refuse the spawn, or wait for it (with progress).

        c.PlatformSpawner.when_dataset_loading = "wait"
        """).tag(config=True)

    def mount_settings(self) -> MountSettings:
        return MountSettings(dict(self.credential_types), self.credentials_mount_path.rstrip("/"),
                             self.datasets_mount_path.rstrip("/"), self.dataset_label, self.dataset_source_annotation,
                             self.dataset_description_annotation)
