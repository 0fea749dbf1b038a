"""The test cluster's pod network and cluster DNS (a test tool, not a product part).

Pod IPs: a real kubelet gets them from the CNI plugin. Here every pod is a local process, so a pod IP
only has to be a local address the pod can bind and the others can dial, and one the API server
accepts in EndpointSlices (it refuses loopback addresses: "may not be in the loopback range").
`PodNetwork.start()` takes one /24 of 10.244.0.0/16 that no other address on `lo` is in and adds
it to `lo` (`ip addr add 10.244.B.1/24 dev lo`: on the loopback device the kernel makes the whole
prefix local, as with 127.0.0.0/8), so each pod gets 10.244.B.x and EndpointSlices, headless
Services and DNS work as in a cluster. `stop()` removes it. Where `ip addr add` is refused (not
root, no `ip`), pods fall back to 127.78.x.y as before and there is no cluster DNS: Services
then have no endpoints (logged once).

Cluster DNS: CoreDNS built from its Go module (`tests/controllers/coredns`, `make controllers`) with
its `kubernetes` plugin on the API server, listening on 10.244.B.1:53. `resolv_conf(ns)` is what
a pod of namespace `ns` gets as /etc/resolv.conf (search `<ns>.svc.cluster.local svc.cluster.local
cluster.local`, `ndots:5`, as the kubelet writes for `dnsPolicy: ClusterFirst`), and `private_mounts`
runs a process in a private mount namespace (`unshare -m`, root) with such files bind-mounted.
CoreDNS also answers ``localhost`` (127.0.0.1, its `hosts` plugin): the controllers run as local
processes behind ``ExternalName: localhost`` Services, and a pod (a local process too) that calls
one by its Service name (Trainer's status server: `KUBEFLOW_TRAINER_SERVER_URL`) gets the CNAME
resolved, as a pod in a cluster gets the controller pod's address.
"""

from __future__ import annotations

import logging
import os
import pathlib
import shutil
import socket
import subprocess
import time
from collections import deque
from typing import TYPE_CHECKING

from tests.cluster import pod_cgroups
from tests.cluster.controlplane import free_port

if TYPE_CHECKING:
    from tests.cluster.netpol import PolicyEnforcer

log = logging.getLogger("tests.cluster.network")

HERE = pathlib.Path(__file__).resolve().parent
COREDNS = HERE.parent / "controllers" / "bin" / "coredns"
CLUSTER_DOMAIN = "cluster.local"
PREFIX = "10.244"


def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True)


def private_mounts(binds: dict[str, str | os.PathLike], argv: list[str]) -> list[str]:
    """`argv` run in a private mount namespace where each `target: source` of `binds` is bind-mounted
    (the target file or directory is made if missing). `unshare` and `sh` exec, so the process keeps
    the pid the caller started (signals and process groups work as before)."""
    script = []
    for target, source in binds.items():
        t = str(target)
        script.append(f'[ -e "{t}" ] || {{ if [ -d "{source}" ]; then mkdir -p "{t}"; else touch "{t}"; fi; }}')
        script.append(f'mount --bind "{source}" "{t}"')
    script.append('exec "$@"')
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", " && ".join(script), "sh", *argv]


class PodNetwork:
    """Pod IPs for a cluster's kubelets and, when the pod network is real, its DNS server."""

    def __init__(self, workdir: pathlib.Path):
        self.dir = pathlib.Path(workdir)
        self.block: str | None = None  # "10.244.B" when the pod network is on lo
        self.dns: str | None = None  # the DNS server's address, when it runs
        self.service_hosts: pathlib.Path | None = None  # while one is kept: tests.cluster.service_hosts
        self.cgroups: pod_cgroups.PodCgroups | None = None  # a cgroup per pod, where policies can be enforced
        self.policies: "PolicyEnforcer | None" = None  # set by the cluster once it follows the API
        self._free: deque[str] = deque()
        self._next = 2
        self._loopback = 0
        self._coredns: subprocess.Popen | None = None

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self, kubeconfig: pathlib.Path | None = None) -> "PodNetwork":
        self.dir.mkdir(parents=True, exist_ok=True)
        self.block = self._add_block()
        why_not = pod_cgroups.available() if self.block else "no pod network block"
        if why_not is None:
            self.cgroups = pod_cgroups.PodCgroups(self.block)
        else:
            log.warning("NetworkPolicies are not enforced: %s", why_not)
        if self.block and kubeconfig is not None:
            if not COREDNS.exists():
                log.warning("no cluster DNS: %s is not built (make controllers)", COREDNS)
            elif not shutil.which("unshare") or os.geteuid() != 0:
                log.warning("no cluster DNS: pods need `unshare -m` as root for their /etc/resolv.conf")
            else:
                self._start_coredns(kubeconfig)
        return self

    def stop(self) -> None:
        if self._coredns is not None:
            self._coredns.kill()
            self._coredns.wait()
            self._coredns = None
            self.dns = None
        if self.cgroups is not None:
            self.cgroups.close()
            self.cgroups = None
        if self.block:
            _ip("addr", "del", f"{self.block}.1/24", "dev", "lo")
            self.block = None

    def _add_block(self) -> str | None:
        if not shutil.which("ip"):
            log.warning("pod IPs fall back to 127.78.x.y (no `ip` command): Services get no endpoints")
            return None
        taken = {line.split()[3].rsplit(".", 1)[0] for line in _ip("-4", "-o", "addr", "show").stdout.splitlines()
                 if line.split()[3].startswith(PREFIX + ".")}
        start = os.getpid() % 250
        for i in range(250):
            block = f"{PREFIX}.{(start + i) % 250 + 1}"
            if block in taken:
                continue
            done = _ip("addr", "add", f"{block}.1/24", "dev", "lo")
            if done.returncode == 0:
                log.info("pod network %s.0/24 on lo", block)
                return block
            if "exists" not in done.stderr:
                log.warning("pod IPs fall back to 127.78.x.y (`ip addr add` refused: %s): Services get no "
                            "endpoints, pods no cluster DNS", done.stderr.strip())
                return None
        return None

    def _start_coredns(self, kubeconfig: pathlib.Path) -> None:
        addr = f"{self.block}.1"
        health, ready = free_port(), free_port()
        corefile = self.dir / "Corefile"
        corefile.write_text(
            f".:53 {{\n"
            f"    bind {addr}\n"
            f"    errors\n"
            f"    health 127.0.0.1:{health}\n"
            f"    ready 127.0.0.1:{ready}\n"
            f"    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{\n"
            f"        kubeconfig {kubeconfig}\n"
            f"        pods insecure\n"
            f"        fallthrough in-addr.arpa ip6.arpa\n"
            f"        ttl 0\n"
            f"    }}\n"
            f"    hosts {{\n"  # an ExternalName Service of `localhost` (a controller run as a local process)
            f"        127.0.0.1 localhost\n"
            f"        fallthrough\n"
            f"    }}\n"
            f"    forward . /etc/resolv.conf\n"
            f"}}\n")
        logfile = open(self.dir / "coredns.log", "ab")
        self._coredns = subprocess.Popen([str(COREDNS), "-conf", str(corefile)], stdout=logfile,
                                         stderr=subprocess.STDOUT, cwd=self.dir, start_new_session=True)
        logfile.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self._coredns.poll() is not None:
                raise RuntimeError(f"CoreDNS exited: {(self.dir / 'coredns.log').read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", ready), 0.5) as s:
                    s.sendall(b"GET /ready HTTP/1.0\r\n\r\n")
                    if b" 200 " in s.recv(100):
                        self.dns = addr
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"CoreDNS not ready in 30 s: {(self.dir / 'coredns.log').read_text()[-2000:]}")

    # ---- pod IPs --------------------------------------------------------------------------------
    @property
    def prefix(self) -> str:
        """What every pod IP of this network starts with."""
        return f"{self.block}." if self.block else "127."

    def allocate(self) -> str:
        if not self.block:
            self._loopback += 1
            n = self._loopback
            return f"127.{78 + (n // 62500) % 100}.{(n // 250) % 250}.{n % 250 + 1}"
        if self._next < 255:
            self._next += 1
            return f"{self.block}.{self._next - 1}"
        if not self._free:
            raise RuntimeError(f"pod network {self.block}.0/24 is full (253 live pods)")
        return self._free.popleft()  # the longest-freed address (its DNS records are long gone)

    async def admit(self, pod: dict, ip: str) -> None:
        """A pod about to start: its cgroup made and its policies in force before its first process."""
        if self.cgroups is not None:
            self.cgroups.make(pod["metadata"]["uid"])
        if self.policies is not None:
            await self.policies.admit(pod, ip)

    def enter(self, uid: str, argv: list[str]) -> list[str]:
        """`argv` started in the pod's cgroup, where there are pod cgroups."""
        return self.cgroups.enter(uid, argv) if self.cgroups is not None else argv

    def forget(self, uid: str) -> None:
        """A pod gone (its processes ended): its cgroup removed."""
        if self.cgroups is not None:
            self.cgroups.remove(uid)

    def release(self, ip: str) -> None:
        if self.block and ip.startswith(self.block + ".") and ip not in self._free:
            self._free.append(ip)

    # ---- DNS for processes ----------------------------------------------------------------------
    def resolv_conf(self, namespace: str) -> pathlib.Path | None:
        """The /etc/resolv.conf of a pod of `namespace` (None: no cluster DNS)."""
        if not self.dns:
            return None
        path = self.dir / "resolv" / f"{namespace}.conf"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            d = CLUSTER_DOMAIN
            path.write_text(f"nameserver {self.dns}\nsearch {namespace}.svc.{d} svc.{d} {d}\noptions ndots:5\n")
        return path
