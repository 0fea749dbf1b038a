"""The PlatformSpawner traits that say how the hub makes dataset PVCs (the datasets page,
`hub_ext.web.datasets_page`), read into a `hub_ext.manifests.datasets.DatasetSettings`; a bad value is refused as the
spawner is made (TraitError naming the setting)."""

from __future__ import annotations

from traitlets import List, TraitError, Unicode, validate
from traitlets.config import Configurable

from hub_ext.manifests.datasets import ACCESS_MODES, DatasetSettings, storage_bytes


class DatasetConfig(Configurable):
    dataset_max_size = Unicode(
        "1Ti", help="""The largest dataset users may add on the hub's datasets page (a Kubernetes quantity).

        c.PlatformSpawner.dataset_max_size = "1Ti"
        """).tag(config=True)
    dataset_storage_class = Unicode(
        "", help="""The StorageClass of the dataset PVCs the hub makes; empty: the cluster's default class.

        c.PlatformSpawner.dataset_storage_class = "standard-rwx"
        """).tag(config=True)
    dataset_access_modes = List(
        Unicode(), ["ReadWriteOnce"], help="""The access modes of the dataset PVCs the hub makes: the loader
        writes a dataset once, servers mount it read-only. ReadWriteOnce lets only pods on one node
        mount it at a time; with a StorageClass that offers it, ReadWriteMany lets servers on every node.

        c.PlatformSpawner.dataset_access_modes = ["ReadWriteMany"]
        """).tag(config=True)

    @validate("dataset_max_size")
    def _valid_max_size(self, proposal):
        try:
            storage_bytes(proposal["value"])
        except ValueError as e:
            raise TraitError(f"PlatformSpawner.dataset_max_size {e}") from None
        return proposal["value"].strip()

    @validate("dataset_access_modes")
    def _valid_access_modes(self, proposal):
        modes = list(proposal["value"])
        if not modes or any(m not in ACCESS_MODES for m in modes):
            raise TraitError(f"PlatformSpawner.dataset_access_modes must be one or more of {', '.join(ACCESS_MODES)}")
        return modes

    def dataset_settings(self) -> DatasetSettings:
        return DatasetSettings(self.dataset_max_size, self.dataset_storage_class, tuple(self.dataset_access_modes))
