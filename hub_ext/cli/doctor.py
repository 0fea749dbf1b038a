"""`mlplatform doctor`: check a cluster for the platform, each problem with its fix.

    mlplatform doctor [--kubeconfig FILE] [--context NAME] [--config FILE ...]
                      [--hub-account NAMESPACE/NAME] [--operator-namespace NS] [--json]

It connects with the kubeconfig (``--kubeconfig``, else ``$KUBECONFIG`` or ``~/.kube/config``;
in a pod without one, the pod's ServiceAccount), runs `hub_ext.kube.doctor.examine` and prints a
line per finding (``ok``, ``warn``, ``FAIL``) with the fix under each problem, then the totals.
``--config`` (a jupyterhub_config.py or z2jh values files, as for check-config) adds the
catalogue's accelerators, checked against the nodes, and the hub's namespace (``hub_namespace``:
the hub account ``<namespace>/hub``, z2jh's ServiceAccount, unless ``--hub-account`` says
otherwise). ``--json`` prints the findings as a JSON list instead.

Exit status: 0 when nothing failed (warnings allowed), 1 when a check failed, 2 when the cluster
cannot be reached or an argument or the config file is wrong. The doctor changes nothing in the
cluster (its one write is a server-side dry run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import sys
from dataclasses import asdict

from kubernetes_asyncio import client, config

from hub_ext.cli.config_files import Unreadable, load_config
from hub_ext.core.errors import ConfigError, UpstreamError
from hub_ext.kube.client import Kube
from hub_ext.kube.doctor import FAIL, OK, WARN, DoctorSettings, Finding, examine
from hub_ext.manifests.needs import OPERATOR_NAMESPACE

_MARK = {OK: "ok  ", WARN: "warn", FAIL: "FAIL"}


def add_parser(sub) -> None:
    doctor = sub.add_parser(
        "doctor", help="check a cluster for the platform (APIs, manifests, rights, webhooks, nodes, projects)",
        description="Check a Kubernetes cluster for everything the platform needs, and print the fix of each "
                    "problem. Exit 0 when nothing failed (warnings allowed), 1 when a check failed, 2 when the "
                    "cluster cannot be reached or the arguments are wrong.")
    doctor.add_argument("--kubeconfig", type=pathlib.Path, metavar="FILE",
                        help="kubeconfig (default: $KUBECONFIG, ~/.kube/config, or the pod's ServiceAccount)")
    doctor.add_argument("--context", metavar="NAME", help="the kubeconfig context (default: its current one)")
    doctor.add_argument("--config", type=pathlib.Path, nargs="+", default=[], metavar="FILE",
                        help="jupyterhub_config.py or z2jh values files: check the catalogue's accelerators "
                             "against the nodes")
    doctor.add_argument("--hub-account", metavar="NAMESPACE/NAME",
                        help="the hub's ServiceAccount (default: <hub_namespace>/hub from --config, else jhub/hub)")
    doctor.add_argument("--operator-namespace", default=OPERATOR_NAMESPACE, metavar="NS",
                        help=f"where the operator runs (default: {OPERATOR_NAMESPACE})")
    doctor.add_argument("--json", action="store_true", help="print the findings as JSON")


def run(args: argparse.Namespace, out=None, err=None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    try:
        settings = _settings(args)
    except (Unreadable, ValueError) as e:
        print(f"error: {e}", file=err)
        return 2
    except ConfigError as e:
        for problem in e.problems:
            print(f"error: {problem}", file=err)
        return 2
    if args.kubeconfig is not None and not args.kubeconfig.is_file():
        print(f"error: --kubeconfig: {args.kubeconfig}: no such file", file=err)
        return 2
    try:
        findings = asyncio.run(_examine(args, settings))
    except (UpstreamError, config.ConfigException, OSError) as e:
        print(f"error: the cluster could not be checked: {getattr(e, 'reason', None) or e}", file=err)
        return 2
    if args.json:
        json.dump([asdict(f) for f in findings], out, indent=1)
        out.write("\n")
    else:
        _print(findings, out)
    return 1 if any(f.status == FAIL for f in findings) else 0


def _settings(args: argparse.Namespace) -> DoctorSettings:
    account, accelerators = args.hub_account, None
    if args.config:
        from hub_ext.setup import located_settings
        from hub_ext.spawners.runtime import Runtime, kubespawner_traits

        for f in args.config:
            if not f.exists():
                raise ValueError(f"--config: {f}: no such file")
        c, section = load_config(args.config[0], *args.config[1:])
        accelerators = Runtime.parse(located_settings(c, section)[0], kubespawner_traits()).accelerators
        hub_namespace = (c.get("PlatformSpawner") or {}).get("hub_namespace")
        if account is None and hub_namespace:
            account = f"{hub_namespace}/hub"
    if account is not None and (account.count("/") != 1 or not all(account.split("/"))):
        raise ValueError(f"--hub-account: must be NAMESPACE/NAME, not {account!r}")
    return DoctorSettings(**({"hub_account": account} if account else {}), operator_namespace=args.operator_namespace,
                          accelerators=accelerators)


async def _examine(args: argparse.Namespace, settings: DoctorSettings) -> list[Finding]:
    configuration = client.Configuration()
    kubeconfig = args.kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    if args.kubeconfig is None and args.context is None and os.environ.get("KUBERNETES_SERVICE_HOST") \
            and not os.path.exists(str(kubeconfig).split(":")[0]):
        config.load_incluster_config(client_configuration=configuration)
    else:
        await config.load_kube_config(config_file=str(kubeconfig), context=args.context,
                                      client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        return await examine(Kube(api, retries=1), settings)


def _print(findings: list[Finding], out) -> None:
    width = max((len(f.check) for f in findings), default=0)
    for f in findings:
        print(f"{_MARK[f.status]}  {f.check.ljust(width)}  {f.detail}", file=out)
        if f.fix:
            print(f"{' ' * (width + 8)}fix: {f.fix}", file=out)
    counts = {s: sum(1 for f in findings if f.status == s) for s in (OK, WARN, FAIL)}
    print(f"{counts[FAIL]} failed, {counts[WARN]} warning(s), {counts[OK]} ok", file=out)
