"""Services' names as a hosts file: a test tool standing in for kube-proxy, and **a debt**.

There is no kube-proxy in the test cluster, so a Service's ClusterIP answers nothing. `ServiceHosts`
keeps a hosts file that maps each Service with a ready endpoint (`<svc>.<ns>`, `<svc>.<ns>.svc`,
`<svc>.<ns>.svc.cluster.local`) to its first ready endpoint's pod IP, read from the EndpointSlices
every 0.3 s: a headless-like answer for the processes that get it as their /etc/hosts (bind-mounted,
so it is rewritten in place: the mount pins the inode). Katib's controller gets it (it dials its
suggestion Services), and so do the pods the process kubelet runs with their volumes at their paths
while it is kept (`PodNetwork.service_hosts`): Katib's metrics collectors dial the medianstop
service. A real cluster dials the ClusterIP and kube-proxy picks an endpoint; here a Service with
several endpoints always gets the first, and ports are not mapped (Katib's Services have port ==
targetPort).
"""

from __future__ import annotations

import pathlib
import threading


class ServiceHosts(threading.Thread):
    """Keeps the hosts file `path` (see the module's docstring) until `stop`."""

    def __init__(self, cluster, path: pathlib.Path, interval: float = 0.3):
        super().__init__(name="service-hosts", daemon=True)
        self.cluster, self.path, self.interval = cluster, path, interval
        self.base = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
        self.path.write_text(self.base)
        self._stop = threading.Event()
        self._last = self.base

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                slices = self.cluster.run(self.cluster.rest.get("/apis/discovery.k8s.io/v1/endpointslices"))
            except Exception:  # the cluster is going away, or a passing error
                slices = {"items": None}
            if slices.get("items") is not None:
                lines = {}
                for s in slices["items"]:
                    svc = (s["metadata"].get("labels") or {}).get("kubernetes.io/service-name")
                    ready = [a for e in s.get("endpoints") or [] if (e.get("conditions") or {}).get("ready", True)
                             for a in e.get("addresses") or []]
                    if svc and ready and s.get("addressType") == "IPv4":
                        ns = s["metadata"]["namespace"]
                        lines.setdefault(f"{svc}.{ns}", ready[0])
                text = self.base + "".join(f"{ip}\t{name} {name}.svc {name}.svc.cluster.local\n"
                                           for name, ip in sorted(lines.items()))
                if text != self._last:
                    with open(self.path, "r+") as f:  # in place
                        f.write(text)
                        f.truncate()
                    self._last = text
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
