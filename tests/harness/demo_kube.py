"""`make demo-kube`: the platform's Kubernetes runtime on one machine, for trying it out. A
demonstration on one machine built from the tests' infrastructure, not a cluster: nothing here is
fit to serve anyone but the person who started it.

    .venv/bin/python -m tests.harness.demo_kube [--port 8000] [--workdir DIR]

It starts, in this order (everything the tests use, nothing played):

- the tests' control plane (`tests.cluster`: etcd, kube-apiserver, kube-controller-manager,
  kube-scheduler built from Go modules by `make cluster`; the PV provisioner; the fault proxy),
  with its pod network on ``lo`` and CoreDNS (`tests.cluster.network`, needs root);
- the tests' kubelet in process mode (each container a local process) with the kube tests' declared
  node inventory `tests.kube.platform_env.NODES`: a DGX-like node with two MIG 1g.5gb slices and one
  3g.20gb slice, one with two whole A100s, one CPU node. No GPU is used: the slices are declared;
- the real Kubeflow Training Operator v1.9.4 and real Katib v0.19.0 (Postgres, katib-db-manager,
  katib-controller, goptuna suggestions, its metrics collectors), out of cluster
  (`tests.controllers`, `make controllers`); Katib only where the pod network runs (root);
- the real Kubeflow Trainer v2.3.0 and JobSet v0.12.0 (`tests.controllers.trainer_system`) with the
  platform's runtime (``helm-values/trainer-runtimes.yaml``); under the job tables' default
  ``training_api: auto`` the users' PyTorch and one-replica jobs are TrainJobs (`docs/jobs.md`);
- the real Kueue v0.17.0 (`tests.controllers.kueue_system`, started after Trainer, so it queues TrainJobs too) with the platform's configuration
  (``helm-values/kueue.yaml``): the hub finds it and makes each project's queues, so a server or
  job that does not fit waits in its project's queue (`docs/queueing.md`);
- JupyterHub with `PlatformSpawner` (`tests.kube.platform_env.kube_hub_config`: the demo's
  catalogue, groups and shared password) on http://127.0.0.1:PORT, acting as the hub's
  ServiceAccount of ``helm-values/hub-rbac.yaml``. The hub makes each user's project (namespace
  ``user-<name>``, and ``vision`` for alice) when the user first sees the spawn form;
- an S3 emulator (moto, as in the tests) with a bucket holding a small sample dataset (``sample/``)
  and a sample key pair, and the platform's operator (`mlplatform operator`, as
  ``helm-values/operator.yaml`` deploys it: its webhooks answer only the API server) loading
  datasets from it: a user adds the key pair as a credential, the sample as a dataset, and mounts it
  in a server, as the seed platform does (README, "Datasets in demo-kube").

It prints the login and the passwords like `make demo`, and an admin kubeconfig for ``kubectl``.
SIGINT (Ctrl-C) or SIGTERM stops the hub (which stops the users' servers), the operator, the kubelet
(every pod process), Katib, Kueue, Trainer v2, the Training Operator, the control plane and the S3 emulator (its ``lo`` address and every mount
go with them), then exits 0. State lives under --workdir (kept), else in a temporary directory
that is removed on exit.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import requests

from hub_ext.local.demo import ADMIN_USER, DemoSecrets, find_proxy_command, free_port, write_config
from hub_ext.local.files import PRIVATE_UMASK
from tests.harness.hub import related_processes, stop_group, wait_answering

DEFAULT_PORT = 8000
RUNTIMES = pathlib.Path(__file__).resolve().parents[2] / "helm-values" / "trainer-runtimes.yaml"
DEMO_UID_BASE = 20000  # user N's notebook pods run as uid 20000 + N
MARKER_ENV = "MLPLATFORM_DEMO_KUBE"


SAMPLE = {"sample/README.txt": b"A sample dataset of the demo's S3 emulator: three small CSV files.\n",
          **{f"sample/part-{i}.csv": "".join(f"{i},{j},{(i * 7 + j) % 10}\n" for j in range(100)).encode()
             for i in range(3)}}


def banner(url: str, demo_secrets: DemoSecrets, kubeconfig: pathlib.Path, katib: bool, store=None) -> str:
    """The one place the passwords are shown: the terminal of whoever ran the demo."""
    sweeps = "real Katib (every algorithm of its katib-config)" if katib else "none (Katib needs the pod network: root)"
    datasets = (
        f"  Datasets:  an S3 emulator at {store.endpoint}; add the credential (Credentials page, aws-credential)\n"
        f"               access key {store.key_id}  secret {store.secret}\n"
        f"             then the dataset s3://{store.bucket}/sample/ with it (Datasets page); mount it when you start.\n"
    ) if store else ""
    return (
        "\n"
        "  JupyterHub demo (Kubernetes runtime: a demonstration on one machine, not a cluster)\n"
        f"    URL:       {url}/hub/login\n"
        f"    Username:  any name; 'alice' (group vision: MIG 1g.5gb slices, team project) and\n"
        f"               'bob' (group research: MIG 3g.20gb slice, whole GPU) see more profiles\n"
        f"    Password:  {demo_secrets.user_password}\n"
        f"    Admin:     user '{ADMIN_USER}', password {demo_secrets.admin_password}\n"
        f"    kubectl:   KUBECONFIG={kubeconfig} (cluster admin)\n"
        f"{datasets}"
        f"  Jobs: the real Training Operator; sweeps: {sweeps}; queues: the real Kueue.\n"
        "  GPUs and MIG slices are declared, not real; pods are local processes, each user's server as a uid\n"
        f"  of their own ({DEMO_UID_BASE} + the hub's user id); jobs run as their images' users (root).\n"
        "  Stop with Ctrl-C.\n"
    )


def hub_config(state: pathlib.Path, demo_secrets: DemoSecrets, port: int) -> str:
    """`kube_hub_config` on `port`, with free ports for the hub and the proxy's API."""
    from tests.kube.platform_env import kube_hub_config

    return kube_hub_config(state, demo_secrets) + f"""
# --- tests.harness.demo_kube ---
c.JupyterHub.bind_url = "http://127.0.0.1:{port}"
c.JupyterHub.hub_port = {free_port()}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{free_port()}"
c.ConfigurableHTTPProxy.command = [{find_proxy_command()!r}]


# each demo user's server as a uid of their own (the tests' kubelet runs a pod as the uid its
# securityContext names): one user's notebook cannot read another's files, nor the demo's
def _demo_uid(spawner):
    return {DEMO_UID_BASE} + spawner.user.id


c.PlatformSpawner.uid = _demo_uid
"""


class Demo:
    """The parts, started by `start()` and stopped (whatever got started) by `stop()`."""

    def __init__(self, workdir: pathlib.Path, port: int, stopping: threading.Event):
        self.dir, self.port, self.stopping = workdir, port, stopping
        self.cluster = self.kubelet = self.operator = self.katib = self.kueue = self.trainer = None
        self.platform_operator = self.store = None
        self._store_context = None
        self.hub: subprocess.Popen | None = None
        self.hub_log = workdir / "hub" / "jupyterhub.log"
        self.marker = secrets.token_hex(8)

    def _step(self, what: str) -> None:
        if self.stopping.is_set():
            raise KeyboardInterrupt
        print(f"demo-kube: {what}", flush=True)

    def start(self) -> tuple[DemoSecrets, pathlib.Path]:
        from tests.cluster.cluster import Cluster
        from tests.cluster.identities import hub_kubeconfig
        from tests.controllers.katib_system import Katib
        from tests.controllers.kueue_system import Kueue
        from tests.controllers.outofcluster import TrainingOperator
        from tests.controllers.trainer_system import TrainerV2
        from tests.kube.platform_env import NODES

        self._step("starting the control plane")
        self.cluster = Cluster(self.dir / "cluster").start()
        admin = self.cluster.write_kubeconfig(self.dir / "admin.kubeconfig")
        self._step("starting the kubelet (process mode; declared nodes: " + ", ".join(n["name"] for n in NODES) + ")")
        self.kubelet = self.cluster.kubelet("process", nodes=NODES, workdir=self.dir / "kubelet")
        self._step("starting the Training Operator")
        self.operator = TrainingOperator(self.cluster, self.dir / "training-operator").start()
        self._step("starting Kubeflow Trainer v2 and JobSet, with the platform's runtime")
        self.trainer = TrainerV2(self.cluster, self.dir / "trainer-v2", feature_gates={"TrainJobStatus": True}).start()
        self.trainer.apply_runtimes(RUNTIMES)
        self._step("starting Kueue (the projects' queues)")
        self.kueue = Kueue(self.cluster, self.dir / "kueue").start()
        if self.cluster.network.dns:
            self._step("starting Katib (Postgres, db-manager, controller)")
            self.katib = Katib(self.cluster, self.dir / "katib").start()
        else:
            print("demo-kube: no pod network/DNS here (not root, or `ip addr add` refused): no Katib, no sweeps",
                  file=sys.stderr, flush=True)
        self._step("starting an S3 emulator with a sample dataset, and the platform's operator")
        self.store = self._start_store()
        self.platform_operator = self._start_platform_operator()
        self._step("starting JupyterHub")
        state = self.dir / "hub"
        demo_secrets = DemoSecrets.generate()
        config = state / "jupyterhub_config.py"
        write_config(config, hub_config(state, demo_secrets, self.port))
        env = {**os.environ, "KUBECONFIG": str(hub_kubeconfig(self.cluster, self.dir / "hub.kubeconfig"))}
        env["PATH"] = os.pathsep.join([str(pathlib.Path(sys.executable).parent), env.get("PATH", "")])
        env[MARKER_ENV] = self.marker  # finds the hub's processes at stop, those that left its group too
        with open(self.hub_log, "ab") as log:
            self.hub = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(config)], cwd=state, env=env,
                                        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        url = f"http://127.0.0.1:{self.port}"
        wait_answering(self.hub, lambda: requests.get(f"{url}/hub/api/", timeout=2).status_code == 200, 90,
                       f"jupyterhub ({url})", lambda: self.hub_log.read_text(errors="replace")[-4000:])
        return demo_secrets, admin

    def _start_store(self):
        from tests.local.object_stores import s3_server

        self._store_context = s3_server()
        store = self._store_context.__enter__()
        client = store.client()
        for key, body in SAMPLE.items():
            client.put_object(Bucket=store.bucket, Key=key, Body=body)
        return store

    def _start_platform_operator(self):
        """`mlplatform operator` installed from helm-values/operator.yaml and started as the kube
        tests start it (`tests.kube.operator_env`), loading datasets from the emulator and writing
        early-stopped trials' observations from the demo's Katib DB manager."""
        import asyncio

        from tests.kube.operator_env import OperatorProcess

        workdir = self.dir / "operator"
        workdir.mkdir(parents=True, exist_ok=True)
        op = OperatorProcess(self.cluster, workdir, [f"--s3-endpoint={self.store.endpoint}",
                                                     f"--katib-db-manager={self.katib.db_address if self.katib else ''}"])

        async def start():
            await op.install()
            try:
                await op.start()
            finally:
                await op._api.close()
        asyncio.run(start())
        return op

    def stop(self) -> None:
        """Stop whatever started, the hub first (it stops the users' servers: their pods go)."""
        if self.hub is not None:
            print("demo-kube: stopping JupyterHub and the users' servers", flush=True)
            pid = self.hub.pid
            marker = f"{MARKER_ENV}={self.marker}".encode()
            stop_group(self.hub, lambda: related_processes(pid, pid, marker), stop_timeout=60, settle_s=10)
            self.hub = None
        print("demo-kube: stopping the kubelet, Katib, Kueue, Trainer v2, the Training Operator and the control plane",
              flush=True)
        if self.platform_operator is not None:
            import asyncio
            asyncio.run(self.platform_operator.stop())
        for part in (self.kubelet, self.katib, self.kueue, self.trainer, self.operator, self.cluster):
            if part is not None:
                try:  # the control plane goes with everything in it: Kueue and Trainer are not uninstalled
                    getattr(part, "halt", part.stop)()
                except Exception as e:  # go on: the rest must stop too
                    print(f"demo-kube: stopping {type(part).__name__}: {e}", file=sys.stderr, flush=True)
        if self._store_context is not None:
            self._store_context.__exit__(None, None, None)


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tests.harness.demo_kube", description=__doc__.split("\n")[0])
    p.add_argument("--port", type=int, default=int(os.environ.get("DEMO_PORT", DEFAULT_PORT)))
    p.add_argument("--workdir", type=pathlib.Path, help="keep the demo's state here (default: a temporary "
                                                         "directory, removed on exit)")
    return p.parse_args(argv)


def missing() -> list[str]:
    from tests.cluster.controlplane import binaries_missing
    from tests.controllers.katib_system import postgres_bin
    from tests.controllers.outofcluster import BIN

    out = [f"{m} (make cluster)" for m in binaries_missing()]
    out += [f"{BIN / n} (make controllers)" for n in ("training-operator", "katib-controller", "katib-db-manager",
                                                      "goptuna-suggestion-listen", "coredns",
                                                      "katib-python/.stamp") if not (BIN / n).exists()]
    return out + ([] if postgres_bin() else ["PostgreSQL (make controllers)"])


def main(argv=None) -> int:
    args = parse(argv)
    lacking = missing()
    if lacking:
        print("demo-kube: not built: " + ", ".join(lacking), file=sys.stderr)
        return 2
    stopping = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())
    os.umask(PRIVATE_UMASK)
    workdir = args.workdir.resolve() if args.workdir else pathlib.Path(tempfile.mkdtemp(prefix="demo-kube-"))
    workdir.mkdir(parents=True, exist_ok=True)
    demo = Demo(workdir, args.port, stopping)
    try:
        demo_secrets, admin = demo.start()
        print(banner(f"http://127.0.0.1:{args.port}", demo_secrets, admin, demo.katib is not None, demo.store),
              flush=True)
        while not stopping.wait(1):
            if demo.hub.poll() is not None:
                print(f"demo-kube: JupyterHub exited ({demo.hub.returncode}); its log: {demo.hub_log}",
                      file=sys.stderr, flush=True)
                return 1
    except KeyboardInterrupt:
        pass
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C does not cut the clean-up short
            signal.signal(sig, signal.SIG_IGN)
        started = time.monotonic()
        demo.stop()
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
        print(f"demo-kube: stopped in {time.monotonic() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
