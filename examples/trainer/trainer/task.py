"""A small, CPU-only training task in AI Platform's shape: ``python -m trainer.task --name=value …``.

It fits a linear regression on a fixed-seed synthetic dataset by minibatch SGD (pure Python, no
numpy) and reports, after every epoch:

- one log line on stdout: ``epoch 3/10 loss=0.0123 rmse=0.1109`` — the ``name=value`` pairs are
  what Katib's stdout metrics collector reads;
- one hyperparameter-tuning report in the format of Google's ``cloudml-hypertune``: the file named
  by ``CLOUD_ML_HP_METRIC_FILE`` (default ``/tmp/hypertune/output.metrics``) holds one JSON object
  per line (keys sorted; at most the last 100 reports), with ``timestamp`` (seconds), ``trial``
  (``CLOUD_ML_TRIAL_ID``, default ``"0"``), ``global_step`` and the metric tag
  (``CLOUD_ML_HP_METRIC_TAG``, default ``rmse``), every value but the timestamp as a string.

- on the primary, one progress report in the fields of Kubeflow Trainer v2's ``trainerStatus``
  (``progressPercentage``: epochs done of ``--epochs``; ``estimatedRemainingSeconds`` from the time
  per epoch so far; ``metrics``: loss and the metric tag, values as strings): a log line
  ``mlplatform progress: {json}`` (what the platform reads on every runtime) and, when
  ``KUBEFLOW_TRAINER_SERVER_URL`` is set (a TrainJob's pod with Trainer's ``TrainJobStatus``
  feature), a POST of ``{"trainerStatus": …}`` to it with the token and CA that Trainer mounts
  (``KUBEFLOW_TRAINER_SERVER_TOKEN``, ``KUBEFLOW_TRAINER_SERVER_CA_CERT``); a failed POST is said
  once and training goes on.

Distributed runs: the role comes from ``TF_CONFIG`` (task type and index, as AI Platform and
``gcloud ai-platform local train --distributed`` set it) or from ``RANK``/``WORLD_SIZE`` (PyTorch);
it is logged first. Every role trains; only the primary (``master``/``chief``, rank 0, or a lone
process) writes ``model.json`` under ``--job-dir`` (local paths only). A parameter server does what
TensorFlow's does: it serves until it is terminated.

With ``--rendezvous=SECONDS`` (0, the default: off) the replicas of a distributed run first meet
over TCP, as a framework's rendezvous does, and fail if that takes longer: the primary listens on
its own address (PyTorch: ``MASTER_ADDR:MASTER_PORT``; TensorFlow: the ``chief``/``master``
address in ``TF_CONFIG``), every other replica resolves that name, connects and says who it is,
and the primary answers once all ``size - 1`` have. Each side logs what it resolved and who met.

Hyperparameters (``--name=value`` or ``--name value``; unknown ones are logged and ignored):
``--learning_rate`` (0.1), ``--epochs`` (10), ``--batch_size`` (16), ``--sleep`` seconds after each
epoch (0.1), ``--fail_at_epoch`` (exit with status 1 at that epoch; 0 never), ``--job-dir``,
``--rendezvous``, ``--wait_for`` (a path: after the first epoch's report, wait until that file
exists before going on; ``{trial}`` in it is replaced by ``CLOUD_ML_TRIAL_ID``, default ``"0"``; empty,
the default: no wait). Tests use it to hold a run at a point they have seen, instead of timing it.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import random
import socket
import ssl
import sys
import time
import urllib.error
import urllib.request

DEFAULT_METRIC_FILE = "/tmp/hypertune/output.metrics"
DEFAULT_METRIC_TAG = "rmse"
PROGRESS_PREFIX = "mlplatform progress: "
TRUE_WEIGHTS = (2.0, -3.0, 0.5)
TRUE_BIAS = 1.0


def log(message: str) -> None:
    print(message, flush=True)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="trainer.task", description=__doc__.splitlines()[0])
    parser.add_argument("--learning_rate", "--learning-rate", type=float, default=0.1)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch_size", "--batch-size", type=int, default=16)
    parser.add_argument("--sleep", type=float, default=0.1, help="seconds to wait after each epoch")
    parser.add_argument("--fail_at_epoch", "--fail-at-epoch", type=int, default=0)
    parser.add_argument("--job-dir", "--job_dir", dest="job_dir", default=None)
    parser.add_argument("--rendezvous", type=float, default=0.0,
                        help="seconds for the replicas of a distributed run to meet over TCP (0: no rendezvous)")
    parser.add_argument("--wait_for", "--wait-for", default="",
                        help="after the first epoch, wait until this file exists ({trial}: CLOUD_ML_TRIAL_ID)")
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        log(f"ignoring unknown arguments: {' '.join(unknown)}")
    if args.epochs < 1 or args.batch_size < 1:
        parser.error("--epochs and --batch_size must be at least 1")
    return args


class Role:
    """Who this process is in the job."""

    def __init__(self, kind: str, index: int, size: int, primary: bool, source: str, primary_address: str = ""):
        self.kind, self.index, self.size, self.primary, self.source = kind, index, size, primary, source
        self.primary_address = primary_address  # host:port of the primary replica, where one is named

    def __str__(self) -> str:
        return f"{self.kind} {self.index} of {self.size} ({self.source})"


def detect_role(env: dict) -> Role:
    tf_config = env.get("TF_CONFIG")
    if tf_config:
        config = json.loads(tf_config)
        task = config.get("task") or {}
        cluster = config.get("cluster") or {}
        size = sum(len(addresses) for addresses in cluster.values()) or 1
        kind = task.get("type") or "master"
        index = int(task.get("index") or 0)
        shape = ", ".join(f"{name}={len(addresses)}" for name, addresses in sorted(cluster.items()))
        primary = (cluster.get("chief") or cluster.get("master") or [""])[0]
        return Role(kind, index, size, kind in ("master", "chief") and index == 0,
                    f"TF_CONFIG cluster {shape or 'empty'}", primary)
    if "RANK" in env and "WORLD_SIZE" in env:
        rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
        master = f"{env.get('MASTER_ADDR', '?')}:{env.get('MASTER_PORT', '?')}"
        return Role("rank", rank, world, rank == 0, f"torch.distributed WORLD_SIZE={world} MASTER={master}",
                    master if "MASTER_ADDR" in env and "MASTER_PORT" in env else "")
    return Role("standalone", 0, 1, True, "no TF_CONFIG or RANK")


def make_data(n: int = 400, seed: int = 7) -> tuple[list, list]:
    """(train, test) lists of (features, target) from a fixed linear model plus noise."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        x = [rng.uniform(-1.0, 1.0) for _ in TRUE_WEIGHTS]
        y = sum(w * xi for w, xi in zip(TRUE_WEIGHTS, x)) + TRUE_BIAS + rng.gauss(0.0, 0.1)
        rows.append((x, y))
    cut = n * 4 // 5
    return rows[:cut], rows[cut:]


def mse(weights: list, bias: float, rows: list) -> float:
    total = 0.0
    for x, y in rows:
        err = sum(w * xi for w, xi in zip(weights, x)) + bias - y
        total += err * err
    return total / len(rows)


def sgd_epoch(weights: list, bias: float, rows: list, lr: float, batch_size: int, rng: random.Random) -> float:
    order = list(range(len(rows)))
    rng.shuffle(order)
    for start in range(0, len(order), batch_size):
        batch = [rows[i] for i in order[start:start + batch_size]]
        grad_w = [0.0] * len(weights)
        grad_b = 0.0
        for x, y in batch:
            err = sum(w * xi for w, xi in zip(weights, x)) + bias - y
            for j, xi in enumerate(x):
                grad_w[j] += 2.0 * err * xi / len(batch)
            grad_b += 2.0 * err / len(batch)
        for j in range(len(weights)):
            weights[j] -= lr * grad_w[j]
        bias -= lr * grad_b
    return bias


class HyperTuneReporter:
    """Reports a metric as ``cloudml-hypertune`` does (see the module docstring)."""

    def __init__(self, env: dict):
        self.path = env.get("CLOUD_ML_HP_METRIC_FILE") or DEFAULT_METRIC_FILE
        self.trial = str(env.get("CLOUD_ML_TRIAL_ID", "0"))
        self.reports: collections.deque = collections.deque(maxlen=100)
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)

    def report(self, tag: str, value: float, global_step: int) -> None:
        self.reports.append({"timestamp": time.time(), "trial": self.trial, tag: str(float(value)),
                             "global_step": str(int(global_step))})
        with open(self.path, "w") as f:
            for entry in self.reports:
                f.write(json.dumps(entry, sort_keys=True) + "\n")


class ProgressReporter:
    """Reports how far training is (see the module docstring): Kubeflow Trainer's status fields,
    as a log line and, where Trainer v2 runs the job, to Trainer's status server."""

    def __init__(self, env: dict, total_steps: int, clock=time.monotonic):
        self.url = env.get("KUBEFLOW_TRAINER_SERVER_URL") or ""
        self.ca = env.get("KUBEFLOW_TRAINER_SERVER_CA_CERT") or None
        self.token_path = env.get("KUBEFLOW_TRAINER_SERVER_TOKEN") or ""
        self.total, self.clock, self.started, self.failed = total_steps, clock, clock(), False

    def status(self, step: int, metrics: dict) -> dict:
        elapsed = self.clock() - self.started
        out = {"progressPercentage": int(100 * step / self.total),
               "metrics": [{"name": name, "value": f"{value:.6g}"} for name, value in metrics.items()]}
        if step > 0:
            out["estimatedRemainingSeconds"] = int(round(elapsed / step * (self.total - step)))
        return out

    def report(self, step: int, metrics: dict) -> None:
        status = self.status(step, metrics)
        log(PROGRESS_PREFIX + json.dumps(status, sort_keys=True))
        if self.url:
            self.post(status)

    def post(self, status: dict) -> None:
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        body = json.dumps({"trainerStatus": {**status, "lastUpdatedTime": when}}).encode()
        try:
            with open(self.token_path) as f:  # read each time: the kubelet renews it
                token = f.read().strip()
            request = urllib.request.Request(self.url, data=body, method="POST", headers={
                "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=5, context=ssl.create_default_context(cafile=self.ca)):
                pass
        except (OSError, urllib.error.URLError, ValueError) as e:
            if not self.failed:  # training goes on; said once
                log(f"progress: could not report to Kubeflow Trainer at {self.url}: {e}")
            self.failed = True


def write_result(job_dir: str, result: dict) -> None:
    if "://" in job_dir:
        log(f"not writing model.json: {job_dir} is not a local directory")
        return
    os.makedirs(job_dir, exist_ok=True)
    path = os.path.join(job_dir, "model.json")
    with open(path + ".tmp", "w") as f:
        json.dump(result, f, indent=2, sort_keys=True)
    os.replace(path + ".tmp", path)
    log(f"wrote {path}")


def _resolve(host: str, deadline: float) -> str:
    """The IPv4 address of `host`, asking again until `deadline` (a replica's name resolves only once
    its pod runs)."""
    while True:
        try:
            return socket.gethostbyname(host)
        except OSError as e:
            if time.monotonic() > deadline:
                raise TimeoutError(f"rendezvous: {host} did not resolve: {e}") from e
            time.sleep(0.2)


def rendezvous(role: Role, seconds: float) -> None:
    """Meet the other replicas over TCP (see the module docstring); raises on timeout."""
    host, _, port = role.primary_address.rpartition(":")
    deadline = time.monotonic() + seconds
    ip = _resolve(host, deadline)
    me = f"{role.kind} {role.index}"
    if role.primary:
        with socket.create_server((ip, int(port))) as server:
            log(f"rendezvous: {me} listening on {host}={ip}:{port} for {role.size - 1} replicas")
            peers = []
            while len(peers) < role.size - 1:
                server.settimeout(max(0.1, deadline - time.monotonic()))
                try:
                    conn, addr = server.accept()
                except socket.timeout as e:
                    raise TimeoutError(f"rendezvous: only {len(peers)} of {role.size - 1} replicas came") from e
                with conn:
                    conn.settimeout(10)
                    peers.append((conn.makefile().readline().strip(), addr[0]))
                    conn.sendall(f"ok {role.size}\n".encode())
        log("rendezvous: met " + ", ".join(f"{who} from {addr}" for who, addr in sorted(peers)))
        return
    while True:
        try:
            with socket.create_connection((ip, int(port)), timeout=10) as conn:
                conn.sendall(f"{me}\n".encode())
                answer = conn.makefile().readline().strip()
            break
        except OSError as e:
            if time.monotonic() > deadline:
                raise TimeoutError(f"rendezvous: could not reach {host}={ip}:{port}: {e}") from e
            time.sleep(0.2)
    log(f"rendezvous: {me} met the primary at {host}={ip}:{port} ({answer})")


def serve_forever(role: Role) -> None:
    log(f"{role.kind} {role.index}: serving until terminated")
    while True:
        time.sleep(3600)


def wait_for(path: str) -> None:
    """Block until the file `path` exists (``--wait_for``), saying so once."""
    log(f"waiting for {path}")
    while not os.path.exists(path):
        time.sleep(0.1)


def main(argv: list[str] | None = None, env: dict | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ if env is None else env)
    role = detect_role(env)
    log(f"role: {role}; primary={role.primary}")
    log(f"hyperparameters: learning_rate={args.learning_rate} epochs={args.epochs} "
        f"batch_size={args.batch_size}")
    if args.rendezvous > 0 and role.size > 1 and role.primary_address:
        rendezvous(role, args.rendezvous)
    if role.kind == "ps":
        serve_forever(role)
    tag = env.get("CLOUD_ML_HP_METRIC_TAG") or DEFAULT_METRIC_TAG
    reporter = HyperTuneReporter(env)
    progress = ProgressReporter(env, args.epochs)
    train, test = make_data()
    rng = random.Random(1000 + role.index)
    weights, bias = [0.0] * len(TRUE_WEIGHTS), 0.0
    steps_per_epoch = math.ceil(len(train) / args.batch_size)
    rmse = float("nan")
    for epoch in range(1, args.epochs + 1):
        if epoch == args.fail_at_epoch:
            print(f"error: failing at epoch {epoch} as asked (--fail_at_epoch={epoch})", file=sys.stderr, flush=True)
            return 1
        bias = sgd_epoch(weights, bias, train, args.learning_rate, args.batch_size, rng)
        loss = mse(weights, bias, train)
        rmse = math.sqrt(mse(weights, bias, test))
        log(f"epoch {epoch}/{args.epochs} loss={loss:.6g} {tag}={rmse:.6g}")
        reporter.report(tag, rmse, epoch * steps_per_epoch)
        if role.primary:
            progress.report(epoch, {"loss": loss, tag: rmse})
        if epoch == 1 and args.wait_for:
            wait_for(args.wait_for.replace("{trial}", env.get("CLOUD_ML_TRIAL_ID") or "0"))
        if args.sleep > 0:
            time.sleep(args.sleep)
    if role.primary and args.job_dir:
        write_result(args.job_dir, {"weights": weights, "bias": bias, tag: rmse, "epochs": args.epochs,
                                    "learning_rate": args.learning_rate, "batch_size": args.batch_size})
    log(f"done: {tag}={rmse:.6g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
