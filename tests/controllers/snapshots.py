"""Volume snapshots for a test cluster: Kubernetes' real snapshot-controller (external-snapshotter
v8, built from its Go module by `build.sh`: `make controllers`) with its released CRDs and RBAC,
and the test cluster's CSI class (`tests.cluster.provisioner.CSI_CLASS`) able to snapshot and
restore (`tests.cluster.snapshots`, which plays the csi-snapshotter sidecar and the driver: a debt).

What changes against the released install: the controller is a local process running as its
ServiceAccount (a token kubeconfig straight to the API server) without leader election; the CRDs
come from the client module the controller's go.mod pins (``config/crd``), not a copy.
`SnapshotController(cluster, workdir).start()` returns once the CRDs are established, the
VolumeSnapshotClass exists and the controller answers ``/healthz/leader-election``.
"""

from __future__ import annotations

import pathlib

import yaml

from tests.cluster.controlplane import free_port
from tests.cluster.provisioner import CSI_CLASS, CSI_DRIVER_OBJECT
from tests.cluster.rest import ApiError
from tests.cluster.snapshots import SNAPSHOT_CLASS, SnapshotDriver
from tests.controllers.outofcluster import BIN, HERE, ControllerProcess, apply, module_dir, render, sa_kubeconfig

MODULE = "github.com/kubernetes-csi/external-snapshotter/v8"
CLIENT_MODULE = "github.com/kubernetes-csi/external-snapshotter/client/v8"
CRDS = ("snapshot.storage.k8s.io_volumesnapshotclasses", "snapshot.storage.k8s.io_volumesnapshotcontents",
        "snapshot.storage.k8s.io_volumesnapshots",  # and the group ones: without them the controller waits 30 s
        "groupsnapshot.storage.k8s.io_volumegroupsnapshotclasses",
        "groupsnapshot.storage.k8s.io_volumegroupsnapshotcontents",
        "groupsnapshot.storage.k8s.io_volumegroupsnapshots")


class SnapshotController:
    NS, SA = "kube-system", "snapshot-controller"

    def __init__(self, cluster, workdir: pathlib.Path):
        self.cluster, self.dir = cluster, pathlib.Path(workdir)
        self.process: ControllerProcess | None = None
        self.driver: SnapshotDriver | None = None

    def start(self, timeout: float = 60) -> "SnapshotController":
        binary = BIN / "snapshot-controller"
        if not binary.exists():
            raise FileNotFoundError(f"{binary} is not built: run `make controllers`")
        root = HERE / "snapshot-controller"
        crd_dir = module_dir(root, CLIENT_MODULE) / "config" / "crd"
        crds = [yaml.safe_load((crd_dir / f"{name}.yaml").read_text()) for name in CRDS]
        self.cluster.run(self._install(crds), timeout=timeout)
        apply(self.cluster, render(module_dir(root, MODULE) / "deploy" / "kubernetes" / "snapshot-controller", {}))
        kubeconfig = sa_kubeconfig(self.cluster, self.NS, self.SA, self.dir / "snapshot-controller.kubeconfig")
        probe = free_port()
        self.process = ControllerProcess(
            [str(binary), f"--kubeconfig={kubeconfig}", "--leader-election=false", f"--http-endpoint=127.0.0.1:{probe}",
             "--retry-interval-start=200ms", "--v=2"], {}, self.dir / "snapshot-controller.log")
        try:
            self.process.wait_http_ok(f"http://127.0.0.1:{probe}/metrics", timeout, "snapshot-controller")
        except BaseException:
            self.stop()
            raise
        return self

    async def _install(self, crds: list[dict]) -> None:
        rest = self.cluster.rest
        for crd in crds:
            await _create(rest, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        for crd in crds:
            await self.cluster._wait_established(crd["metadata"]["name"])
        await _create(rest, "/apis/storage.k8s.io/v1/storageclasses", CSI_CLASS)
        await _create(rest, "/apis/storage.k8s.io/v1/csidrivers", CSI_DRIVER_OBJECT)
        await _create(rest, "/apis/snapshot.storage.k8s.io/v1/volumesnapshotclasses", SNAPSHOT_CLASS)
        self.driver = SnapshotDriver(rest, self.cluster.dir)
        self.driver.start()

    def stop(self) -> None:
        if self.process:
            self.process.stop()
        if self.driver:
            self.cluster.run(self.driver.stop())


async def _create(rest, path: str, body: dict) -> None:
    try:
        await rest.post(path, body)
    except ApiError as e:
        if e.status != 409:
            raise
