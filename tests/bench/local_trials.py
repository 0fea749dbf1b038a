"""Per-trial overhead of a local sweep (`server_ext.runtimes.local.sweeps`) against running the trial
script directly. Goal: at most 5% for 1-second trials.

    .venv/bin/python -m tests.bench.local_trials [--trials 10] [--seconds 1.0]

A throw-away package (``benchtrial``, a directory run in place, as ``packageUris`` allows) holds a
trial script that sleeps ``--seconds`` and reports one hypertune metric. It is run `--trials` times:

- directly: ``python -m benchtrial.task --x=…`` one after another with `subprocess.run`, the
  metrics file and ``PYTHONPATH`` in its environment — the floor;
- as a sweep: the same trials through `LocalBackend` (default algorithm, ``maxParallelTrials`` 1,
  ``maxTrials`` = `--trials`), timed from ``submit`` to the sweep's final state. Everything the
  backend adds is in it: the Optuna study in SQLite (create, ask, tell), each trial's job record,
  the ``/bin/sh`` wrapper, the metrics file read, and noticing each end.

Optuna is imported before timing (a notebook server has it loaded). Prints the direct time, the
sweep's per-trial time (its first trial's start to its last trial's end: what each trial costs) and
its end-to-end time (submit to final state: adds the sweep's one-time set-up, its study created in
a fresh SQLite file), and the overhead; exits 1 when the sweep failed.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import pathlib
import subprocess
import sys
import tempfile
import time

from server_ext.jobs.backend import FINAL
from server_ext.jobs.machines import Machines
from server_ext.jobs.model import parse_job
from server_ext.jobs.plan import PlanSettings, plan_job
from server_ext.runtimes.local.backend import LocalBackend

TRIAL = '''\
import argparse, json, os, time
parser = argparse.ArgumentParser()
parser.add_argument("--x", type=float, default=0.0)
parser.add_argument("--seconds", type=float, default=1.0)
args, _ = parser.parse_known_args()
time.sleep(args.seconds)
with open(os.environ.get("CLOUD_ML_HP_METRIC_FILE", "/dev/null"), "w") as f:
    f.write(json.dumps({"timestamp": time.time(), "loss": str((args.x - 0.3) ** 2), "global_step": "1"}) + "\\n")
'''


def make_package(root: pathlib.Path) -> pathlib.Path:
    pkg = root / "benchtrial"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "task.py").write_text(TRIAL)
    return pkg


def run_direct(root: pathlib.Path, trials: int, seconds: float) -> float:
    env = {**os.environ, "PYTHONPATH": str(root), "CLOUD_ML_HP_METRIC_FILE": str(root / "direct.metrics")}
    start = time.perf_counter()
    for i in range(trials):
        subprocess.run([sys.executable, "-m", "benchtrial.task", f"--x={i / trials}", f"--seconds={seconds}"],
                       env=env, check=True)
    return time.perf_counter() - start


async def run_sweep(root: pathlib.Path, pkg: pathlib.Path, trials: int, seconds: float) -> tuple[float, dict]:
    doc = {"jobId": "bench", "trainingInput": {
        "pythonModule": "benchtrial.task", "packageUris": [str(pkg)], "args": [f"--seconds={seconds}"],
        "region": "local", "hyperparameters": {
            "goal": "MINIMIZE", "hyperparameterMetricTag": "loss", "maxTrials": trials, "maxParallelTrials": 1,
            "params": [{"parameterName": "x", "type": "DOUBLE", "minValue": 0.0, "maxValue": 1.0}]}}}
    plan = plan_job(parse_job(doc), PlanSettings(Machines(accelerators={})), project="bench", owner="bench")
    backend = await LocalBackend.create(root / "state")
    try:
        start = time.perf_counter()
        job = await backend.submit(plan)
        while job["state"] not in FINAL:
            await asyncio.sleep(0.005)
            job = await backend.get("bench", "bench")
        return time.perf_counter() - start, job
    finally:
        await backend.close()


def stamp(rfc3339: str) -> float:
    return dt.datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tests.bench.local_trials", description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=1.0, help="how long each trial sleeps")
    args = parser.parse_args(argv)
    import optuna  # noqa: F401  (loaded before timing, as in a running notebook server)

    with tempfile.TemporaryDirectory(prefix="bench-local-trials-") as tmp:
        root = pathlib.Path(tmp)
        pkg = make_package(root)
        direct = run_direct(root, args.trials, args.seconds)
        swept, job = asyncio.run(run_sweep(root, pkg, args.trials, args.seconds))
    n = args.trials
    trials = job["trainingOutput"].get("trials", [])
    steady = stamp(trials[-1]["endTime"]) - stamp(trials[0]["startTime"]) if trials else float("nan")
    setup = stamp(trials[0]["startTime"]) - stamp(job["createTime"]) if trials else float("nan")
    print(f"local trials: {n} trials of {args.seconds:g} s, one at a time ({job['state']}, "
          f"{job['trainingOutput'].get('completedTrialCount')} completed)")
    print(f"  direct (subprocess):           {direct:7.2f} s  {direct / n * 1000:7.1f} ms/trial")
    print(f"  local sweep, per trial:        {steady:7.2f} s  {steady / n * 1000:7.1f} ms/trial  "
          f"(first trial's start to last trial's end)")
    print(f"  local sweep, end to end:       {swept:7.2f} s  {swept / n * 1000:7.1f} ms/trial  "
          f"(submit to final state; set-up before the first trial {setup * 1000:.0f} ms)")
    print(f"  overhead per trial:            {(steady - direct) / n * 1000:7.1f} ms = "
          f"{(steady - direct) / direct * 100:.1f}% (goal <= 5%); end to end {(swept - direct) / direct * 100:.1f}%")
    return 0 if job["state"] == "SUCCEEDED" else 1


if __name__ == "__main__":
    sys.exit(main())
