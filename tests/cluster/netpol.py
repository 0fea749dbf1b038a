"""NetworkPolicy enforcement for the test cluster's pods (a test tool, not a product part).

DEBT: this plays a network policy engine (Calico's Felix, Cilium, kube-router), which needs a CNI
and pod network namespaces that the tests' kubelet does not have: its pods are processes on the
host's network namespace with addresses on `lo` (`network.py`). Retire it when pods get network
namespaces and a real engine runs here.

How a connection is told apart: the kubelet runs each pod's processes in a cgroup (v2) of its own,
`<mount>/mlplatform-pods-<B>/<pod uid>` (`PodCgroups`), so a socket says which pod made it
(nftables `socket cgroupv2`); a pod is reached at its pod IP. `PolicyEnforcer` follows Pods,
Namespaces and NetworkPolicies and keeps one nftables table, `inet mlplatform_netpol_<B>`, on the
output hook (every local connection passes it once, as its sender's socket):

- a new connection from a pod that an Egress policy selects goes on only if a rule of one of those
  policies allows its destination (pods by pod/namespace selector, `ipBlock` with `except`, ports);
- a new connection to the IP of a pod that an Ingress policy selects is accepted only from the pod
  itself, from a pod a rule allows (selectors; `ipBlock` as the pod IPs in it) on the rule's ports,
  or from a process that is not a pod (the hub, the proxy, the API server, the tests: node-local
  traffic, which the usual engines allow too);
- the rest is refused at once (a TCP reset, an ICMP admin-prohibited), where a real engine would
  mostly drop: the tests' refusals need no time-outs.

Replies (`ct state established,related`) and a pod's loopback (127.0.0.0/8, which is the host's
here) are not filtered. A pod is in the table before its first process starts (`admit`, called by
the kubelet), as a CNI sets a pod up before its containers run; a policy made later applies within
the time its watch event takes (~0.1 s), as with a real engine. Named ports are resolved on the
destination pod's container ports (`endPort` ranges are honoured). Not modelled: SCTP, IPv6 pod
addresses (pods have none).

The pods' cgroups are `pod_cgroups.py`'s; its `available()` says why enforcement cannot run here, and
the cluster then runs without it and logs that once.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import subprocess

from tests.cluster.pod_cgroups import PodCgroups
from tests.cluster.rest import Rest

log = logging.getLogger("tests.cluster.netpol")

DONE_PHASES = ("Succeeded", "Failed")


# ---- selectors ---------------------------------------------------------------------------------
def selects(selector: dict | None, labels: dict) -> bool:
    """A LabelSelector's match (None selects nothing; {} selects everything)."""
    if selector is None:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


class _Pod:
    __slots__ = ("uid", "ns", "labels", "ip", "ports")

    def __init__(self, uid: str, ns: str, labels: dict, ip: str | None, ports: dict):
        self.uid, self.ns, self.labels, self.ip, self.ports = uid, ns, labels, ip, ports


def _container_ports(pod: dict) -> dict[str, tuple[str, int]]:
    out = {}
    for c in [*(pod["spec"].get("initContainers") or []), *(pod["spec"].get("containers") or [])]:
        for p in c.get("ports") or []:
            if p.get("name"):
                out[p["name"]] = ((p.get("protocol") or "TCP").lower(), p["containerPort"])
    return out


class _Objects:
    """One kind's objects as the API has them now, by `key` (a list-then-watch's cache); `changed()`
    after every change."""

    def __init__(self, key, changed):
        self.key, self.changed = key, changed
        self.items: dict = {}
        self.synced = asyncio.Event()

    async def listed(self, items: list[dict]) -> None:
        self.items = {self.key(o): o for o in items}
        self.synced.set()
        self.changed()

    async def put(self, obj: dict) -> None:
        self.items[self.key(obj)] = obj
        self.changed()

    async def drop(self, obj: dict) -> None:
        self.items.pop(self.key(obj), None)
        self.changed()

    def follow(self, rest: Rest, path: str):
        return rest.follow(path, self.put, "network policies", listed=self.listed, deleted=self.drop)


class PolicyEnforcer:
    """The cluster's NetworkPolicies as one nftables table (see the module's docstring)."""

    def __init__(self, rest: Rest, cgroups: PodCgroups, block: str):
        self.rest, self.cgroups = rest, cgroups
        self.table = f"mlplatform_netpol_{block.replace('.', '_')}"
        changed = self._wake_up
        self.pods = _Objects(lambda o: o["metadata"]["uid"], changed)
        self.namespaces = _Objects(lambda o: o["metadata"]["name"], changed)
        self.policies = _Objects(lambda o: (o["metadata"]["namespace"], o["metadata"]["name"]), changed)
        self.admitted: dict[str, tuple[dict, str]] = {}  # uid → (pod, IP) given by the kubelet at its start
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._last = ""
        self.renders = 0

    def _wake_up(self) -> None:
        self._wake.set()

    # ---- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> "PolicyEnforcer":
        await self._nft(f"table inet {self.table} {{}}\ndelete table inet {self.table}\n")  # a killed run's
        loop = asyncio.get_running_loop()
        kinds = ((self.pods, "/api/v1/pods"), (self.namespaces, "/api/v1/namespaces"),
                 (self.policies, "/apis/networking.k8s.io/v1/networkpolicies"))
        self._tasks = [*(loop.create_task(objects.follow(self.rest, path)) for objects, path in kinds),
                       loop.create_task(self._render_loop())]
        await asyncio.wait_for(asyncio.gather(*(objects.synced.wait() for objects, _ in kinds)), 30)
        await self.render()
        return self

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._nft(f"table inet {self.table} {{}}\ndelete table inet {self.table}\n")

    async def admit(self, pod: dict, ip: str) -> None:
        """A pod about to start its first process (its IP not yet in its status): its rules first."""
        self.admitted[pod["metadata"]["uid"]] = (pod, ip)
        await self.render()

    async def _render_loop(self) -> None:
        while True:
            await self._wake.wait()
            await asyncio.sleep(0.05)  # one render for a burst of events
            self._wake.clear()
            try:
                await self.render()
            except Exception as e:  # logged; the next event renders again
                log.warning("network policies not applied: %s", e)

    # ---- the ruleset ----------------------------------------------------------------------------
    async def render(self) -> None:
        async with self._lock:
            for attempt in range(3):
                text = self.ruleset()
                if text == self._last:
                    return
                try:
                    await self._nft(text)
                except RuntimeError:  # a pod's cgroup went meanwhile: render without it
                    if attempt == 2:
                        raise
                    continue
                self._last = text
                self.renders += 1
                return

    async def _nft(self, text: str) -> None:
        proc = await asyncio.create_subprocess_exec("nft", "-f", "-", stdin=subprocess.PIPE,
                                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _, err = await proc.communicate(text.encode())
        if proc.returncode != 0:
            raise RuntimeError(f"nft: {err.decode().strip()[:2000]}")

    def _namespace_labels(self, name: str) -> dict:
        ns = self.namespaces.items.get(name)
        return (ns["metadata"].get("labels") or {"kubernetes.io/metadata.name": name}) if ns else {}

    def _live(self) -> list[_Pod]:
        """Pods that have not ended, with an address (their status's, else the one the kubelet gave
        at their start) and a cgroup (a rule cannot name a cgroup that is gone)."""
        self.admitted = {uid: a for uid, a in self.admitted.items() if self.cgroups.path(uid).is_dir()}
        pods = dict(self.admitted)  # (pod, IP) by uid: the kubelet's first, the API's over them
        for uid, pod in self.pods.items.items():
            status = pod.get("status") or {}
            if status.get("phase") in DONE_PHASES:
                pods.pop(uid, None)
            else:
                pods[uid] = (pod, status.get("podIP") or self.admitted.get(uid, (None, None))[1])
        return [_Pod(uid, pod["metadata"]["namespace"], pod["metadata"].get("labels") or {}, ip,
                     _container_ports(pod)) for uid, (pod, ip) in pods.items()
                if ip and self.cgroups.path(uid).is_dir()]

    def _peers(self, ns: str, peers: list[dict] | None, pods: list[_Pod]) -> tuple[list[_Pod], list[dict], bool]:
        """(pods, ipBlocks, everything) a rule's `from`/`to` names; no peers: everything."""
        if not peers:
            return [], [], True
        chosen, blocks = {}, []
        for peer in peers:
            if "ipBlock" in peer:
                blocks.append(peer["ipBlock"])
                continue
            ns_sel, pod_sel = peer.get("namespaceSelector"), peer.get("podSelector")
            for p in pods:
                in_ns = (p.ns == ns) if ns_sel is None else selects(ns_sel, self._namespace_labels(p.ns))
                if in_ns and (pod_sel is None or selects(pod_sel, p.labels)):
                    chosen[p.uid] = p
        return list(chosen.values()), blocks, False

    @staticmethod
    def _in_block(ip: str, block: dict) -> bool:
        addr = ipaddress.ip_address(ip)
        try:
            net = ipaddress.ip_network(block["cidr"], strict=False)
        except ValueError:
            return False
        if addr.version != net.version or addr not in net:
            return False
        return not any(addr in ipaddress.ip_network(x, strict=False) for x in block.get("except") or []
                       if ipaddress.ip_network(x, strict=False).version == addr.version)

    @staticmethod
    def _ports(ports: list[dict] | None, target: _Pod | None) -> list[str] | None:
        """nft matches for a rule's ports ([""]: any port; None: none can match)."""
        if not ports:
            return [""]
        out = []
        for p in ports:
            proto = (p.get("protocol") or "TCP").lower()
            if proto not in ("tcp", "udp"):
                continue
            port = p.get("port")
            if port is None:
                out.append(f"meta l4proto {proto}")
                continue
            if isinstance(port, str) and not port.isdigit():  # a named port: the destination's
                named = target.ports.get(port) if target else None
                if not named or named[0] != proto:
                    continue
                port = named[1]
            end = p.get("endPort")
            out.append(f"meta l4proto {proto} th dport {port}" + (f"-{end}" if end else ""))
        return out or None

    def _cg(self, pod: _Pod) -> str:
        return f'socket cgroupv2 level {self.cgroups.depth + 1} "{self.cgroups.nft_name(self.cgroups.path(pod.uid))}"'

    def _isolated(self, pod: _Pod, kind: str) -> list[dict]:
        return [p for (ns, _), p in sorted(self.policies.items.items()) if ns == pod.ns
                and kind in (p["spec"].get("policyTypes") or (["Ingress", "Egress"] if p["spec"].get("egress")
                                                               else ["Ingress"]))
                and selects(p["spec"].get("podSelector", {}), pod.labels)]

    def ruleset(self) -> str:
        pods = sorted(self._live(), key=lambda p: p.uid)
        out_rules = ["ct state established,related accept", "ip daddr 127.0.0.0/8 accept"]
        chains: list[str] = []
        for i, pod in enumerate(pods):
            policies = self._isolated(pod, "Egress")
            if policies:
                chains.append(_chain(f"egress_{i}", [*self._egress_rules(pod, policies, pods), *REFUSE]))
                out_rules.append(f"{self._cg(pod)} jump egress_{i}")
        base = f'socket cgroupv2 level {self.cgroups.depth} "{self.cgroups.nft_name(self.cgroups.base)}"'
        for i, pod in enumerate(pods):
            policies = self._isolated(pod, "Ingress")
            if policies:  # allowed pods, then any other pod refused; not a pod (the node): accepted
                rules = [*self._ingress_rules(pod, policies, pods), *(f"{base} {r}" for r in REFUSE), "accept"]
                chains.append(_chain(f"ingress_{i}", rules))
                out_rules.append(f"ip daddr {pod.ip} jump ingress_{i}")
        head = "chain output {\n  type filter hook output priority filter; policy accept;\n"
        body = "\n".join([head + "".join(f"  {r}\n" for r in out_rules) + "}", *chains])
        return (f"table inet {self.table} {{}}\ndelete table inet {self.table}\n"
                f"table inet {self.table} {{\n{body}\n}}\n")

    def _egress_rules(self, pod: _Pod, policies: list[dict], pods: list[_Pod]) -> list[str]:
        """`return` (go on to the destination's ingress) for each destination a policy allows."""
        rules = []
        for rule in (r for policy in policies for r in policy["spec"].get("egress") or []):
            targets, blocks, anything = self._peers(pod.ns, rule.get("to"), pods)
            if anything:
                rules += [f"{m} return".strip() for m in self._ports(rule.get("ports"), None) or []]
            for t in targets:
                rules += [f"ip daddr {t.ip} {m} return" for m in self._ports(rule.get("ports"), t) or []]
            for b in blocks:
                rules += [f"{_block_match(b)} {m} return" for m in self._ports(rule.get("ports"), None) or []]
        return rules

    def _ingress_rules(self, pod: _Pod, policies: list[dict], pods: list[_Pod]) -> list[str]:
        """`accept` for the pod itself and each source pod (on its ports) a policy allows."""
        rules = [f"{self._cg(pod)} accept"]
        for rule in (r for policy in policies for r in policy["spec"].get("ingress") or []):
            sources, blocks, anything = self._peers(pod.ns, rule.get("from"), pods)
            sources += [p for p in pods if any(self._in_block(p.ip, b) for b in blocks)]
            matches = self._ports(rule.get("ports"), pod) or []
            if anything:
                rules += [f"{m} accept".strip() for m in matches]
            for source in {x.uid: x for x in sources}.values():
                rules += [f"{self._cg(source)} {m} accept".strip() for m in matches]
        return rules


REFUSE = ["meta l4proto tcp reject with tcp reset", "reject with icmpx type admin-prohibited"]


def _chain(name: str, rules: list[str]) -> str:
    return f"chain {name} {{\n" + "".join(f"  {r}\n" for r in rules) + "}"


def _block_match(block: dict) -> str:
    """An ipBlock as an nft destination match (its family; the CIDR unless /0; not its excepts)."""
    fam = "ip6" if ":" in block["cidr"] else "ip"
    cidr = "" if block["cidr"].endswith("/0") else block["cidr"]
    ex = ", ".join(block.get("except") or [])
    return (f"meta nfproto {'ipv6' if fam == 'ip6' else 'ipv4'}" + (f" {fam} daddr {cidr}" if cidr else "")
            + (f" {fam} daddr != {{ {ex} }}" if ex else ""))
