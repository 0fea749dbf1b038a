"""A test helper playing a real component, not product code, and a **debt**: Katib v1beta1's
Experiment and Trial controllers (with a built-in suggestion service) against the real control plane.
Real Katib v0.19.0 now runs in the kube tier (`tests.controllers.katib_system`, fixture `real_katib`,
tests/kube/test_katib_real.py, test_tenancy_doors.py's native Experiments); this helper is kept only
where the real one cannot serve:

- sweeps whose algorithm is Python-only in Katib: ``bayesianoptimization`` (skopt; the platform's
  default for ``ALGORITHM_UNSPECIFIED``) and ``grid`` (optuna) — tests/kube/test_kube_sweeps.py's
  default-algorithm and grid cases;
- tests that script a trial's pod by hand on a status-mode kubelet (``run``, ``log``, ``finish``
  with made-up metric lines: test_kube_sweeps.py): Katib's real collector reads a real process's
  output in the pod, which such a pod does not have.

The real controller is cluster-wide; it runs only while a module that asks for it runs, so the two
never act on the same Experiment. It is an ordinary API
client (`hub_ext.kube.client.Kube`) of the real Katib CRDs (`tests/cluster/crds`, which carry no schema:
the API server keeps what it writes as written), and does what Katib does:

- Experiment controller: writes ``Created`` then ``Running`` (status subresource, merge patch) and
  creates Trials ``<experiment>-<8 random [a-z0-9]>`` labelled ``katib.kubeflow.org/experiment`` (and
  carrying the Experiment's own labels, as Katib's ``TrialLabels`` does), owned by the Experiment
  (controller ownerReference), with ``spec.objective``, ``spec.parameterAssignments``,
  ``spec.runSpec`` (``trialTemplate.trialSpec`` with ``${trialParameters.<name>}`` and
  ``${trialSpec.Name|Namespace|Kind|APIVersion}`` replaced in its JSON text, named after the Trial),
  ``metricsCollector``, ``primaryContainerName`` and the success/failure conditions. Counting as
  Katib's ``ReconcileTrials``: active = not yet completed; completed = Succeeded, Failed, Killed,
  EarlyStopped or MetricsUnavailable; it adds ``min(parallelTrialCount, maxTrialCount - completed)
  - active`` trials and deletes the newest active ones when more than ``parallelTrialCount`` run
  (Katib's way to lower parallelism). Status: ``trials``, ``trialsPending/Running/Succeeded/Failed/
  Killed``, ``trialMetricsUnavailable``, the name lists, ``currentOptimalTrial`` (best objective
  value by ``metricStrategies``, default max for MAXIMIZE, min for MINIMIZE), and ``Succeeded``
  (``ExperimentGoalReached``, ``ExperimentMaxTrialsReached``, ``ExperimentSuggestionEndReached``)
  or ``Failed`` (``ExperimentFailed``, failed ≥ max) with ``Running`` turned False. Nothing is
  created for an Experiment being deleted or completed.
- Suggestions: ``grid`` walks the product of the parameters' values in order (``list``, or
  ``min..max`` by ``step``, default 1); any other algorithm draws at random within
  ``feasibleSpace`` (``logUniform`` distribution: log-uniformly) from a seeded generator.
  No Suggestion objects are made.
- Trial controller: ``Created``; creates ``runSpec`` owned by the Trial (the Training Operator
  helper, `tests.kube.training_operator`, or the control plane's Job controller then runs it);
  ``Running`` while the job's ``Running`` condition is true (a batch Job: a ready pod); on the
  success condition (a GJSON ``status.conditions.#(type=="X")#|#(status=="True")#``, by default
  ``Succeeded`` for PyTorchJob/TFJob and ``Complete`` for Job) it reads the log of the job's master pod's primary
  container through ``pods/log`` and parses Katib's StdOut format (``name=value``) and JSON lines
  (``{"<name>": value, …}``: what a ``File`` collector with format ``JSON`` reads from its file,
  which the test kubelet's pods cannot have without Katib's webhook; `katib_trial.trial_command` writes
  one such line per ``<name>=<number>`` the trainer prints, and echoes to the log each line
  cloudml-hypertune writes to the file) for the objective and additional metrics: ``status.observation.metrics[]``
  (``name``, ``latest``, ``min``, ``max`` as strings) and ``Succeeded``; no objective value →
  ``MetricsUnavailable`` (values ``unavailable``); the failure condition → ``Failed``.
  ``completionTime`` when it ends.
"""

from __future__ import annotations

import copy
import itertools
import json
import logging
import math
import random
import re
import string

from hub_ext.kube.client import Conflict, Kube, KubeError, NotFound, reason
from hub_ext.kube.watchcache import WatchCache
from server_ext.jobs.kube.kubeflow import resource_path
from tests.kube.controller import Controller, controller_ref
from tests.kube.training_operator import KINDS, MERGE, is_true, now, set_condition

log = logging.getLogger("tests.katib_controller")
EXPERIMENT_LABEL = "katib.kubeflow.org/experiment"
KATIB = "/apis/kubeflow.org/v1beta1/namespaces/{ns}/{plural}"
COMPLETED = ("Succeeded", "Failed", "Killed", "EarlyStopped", "MetricsUnavailable")
DEFAULT_CONDITIONS = {"Job": ("Complete", "Failed")}  # else (Succeeded, Failed), as Katib's defaults
# Katib's default StdOut filter: <name>=<number>
STDOUT_METRIC = re.compile(r"([\w|-]+)\s*=\s*([+-]?\d*(\.\d+)?([Ee][+-]?\d+)?)")
_COND_TYPE = re.compile(r'#\(type=="(\w+)"\)#')
_PARAM_REF = re.compile(r"\$\{trialParameters\.([^}]+)\}")


def _owned_by(obj: dict, owner: dict) -> bool:
    return any(o.get("uid") == owner["metadata"]["uid"] for o in obj["metadata"].get("ownerReferences") or [])


def completed(trial: dict) -> bool:
    return any(is_true(trial, t) for t in COMPLETED)


class KatibController(Controller):
    def __init__(self, kube: Kube, namespace: str, *, seed: int = 0):
        super().__init__(kube, namespace)
        self.rng = random.Random(seed)
        self.experiments = self.watch(KATIB.format(ns=namespace, plural="experiments"), "Experiment")
        self.trials = self.watch(KATIB.format(ns=namespace, plural="trials"), "Trial")
        self.jobs = {kind: self.watch(path.format(ns=namespace), kind) for kind, (path, *_) in KINDS.items()}
        self.max_running = 0  # the most trials active at once, over all experiments (for tests)

    def caches(self) -> list[WatchCache]:
        return [self.experiments, self.trials, *self.jobs.values()]

    async def reconcile_all(self) -> None:
        for trial in self.trials.items():
            await self._guard(self.reconcile_trial, trial)
        for exp in self.experiments.items():
            await self._guard(self.reconcile_experiment, exp)

    async def _guard(self, fn, obj: dict) -> None:
        try:
            await fn(obj)
        except KubeError as e:
            log.warning("katib: %s %s: %s", obj.get("kind"), obj["metadata"]["name"], reason(e))

    async def _write_status(self, plural: str, cache: WatchCache, obj: dict, status: dict) -> None:
        if status == (obj.get("status") or {}):
            return
        path = KATIB.format(ns=self.ns, plural=plural) + f"/{obj['metadata']['name']}/status"
        patch = {**{k: None for k in obj.get("status") or {} if k not in status}, **status}  # a merge patch
        try:
            cache.put(await self.kube.request("PATCH", path, {"status": patch}, content_type=MERGE))
        except NotFound:
            pass

    # ---- experiments -------------------------------------------------------------------------------
    async def reconcile_experiment(self, exp: dict) -> None:
        meta, spec = exp["metadata"], exp["spec"]
        if meta.get("deletionTimestamp") or is_true(exp, "Succeeded") or is_true(exp, "Failed"):
            return
        trials = sorted((t for t in self.trials.items() if _owned_by(t, exp)),
                        key=lambda t: (t["metadata"].get("creationTimestamp", ""), t["metadata"]["name"]))
        by = {t: [x["metadata"]["name"] for x in trials if is_true(x, t)] for t in COMPLETED}
        running = [x["metadata"]["name"] for x in trials if not completed(x) and is_true(x, "Running")]
        pending = [x["metadata"]["name"] for x in trials if not completed(x) and not is_true(x, "Running")]
        active, done = len(running) + len(pending), sum(len(v) for v in by.values())
        self.max_running = max(self.max_running, active)
        status = copy.deepcopy(exp.get("status") or {})
        status.setdefault("startTime", now())
        conds = set_condition(status.get("conditions") or [], "Created", "True", "ExperimentCreated",
                              "Experiment is created")
        optimal = self._optimal(spec, [x for x in trials if is_true(x, "Succeeded")])
        status.update(trials=len(trials), trialsPending=len(pending), trialsRunning=len(running),
                      trialsSucceeded=len(by["Succeeded"]), trialsFailed=len(by["Failed"]),
                      trialsKilled=len(by["Killed"]), trialsEarlyStopped=len(by["EarlyStopped"]),
                      trialMetricsUnavailable=len(by["MetricsUnavailable"]), pendingTrialList=pending,
                      runningTrialList=running, succeededTrialList=by["Succeeded"], failedTrialList=by["Failed"],
                      killedTrialList=by["Killed"], metricsUnavailableTrialList=by["MetricsUnavailable"],
                      currentOptimalTrial=optimal)
        status = {k: v for k, v in status.items() if v not in ([], 0, None)}
        max_trials, parallel = spec.get("maxTrialCount"), int(spec.get("parallelTrialCount") or 3)
        max_failed = spec.get("maxFailedTrialCount")
        objective = spec.get("objective") or {}
        end = None
        if objective.get("goal") is not None and optimal.get("bestTrialName"):
            value = float(next(m for m in optimal["observation"]["metrics"]
                               if m["name"] == objective["objectiveMetricName"])["latest"])
            goal, maximize = float(objective["goal"]), objective.get("type") == "maximize"
            if (maximize and value >= goal) or (not maximize and value <= goal):
                end = ("Succeeded", "ExperimentGoalReached", "Experiment has succeeded because Objective goal has reached")
        # as real Katib v0.19.0 (experiment/util/status_util.go): failed ≥ max, reason ExperimentFailed
        if end is None and max_failed is not None and by["Failed"] and len(by["Failed"]) >= int(max_failed):
            end = ("Failed", "ExperimentFailed", "Experiment has failed because max failed count has reached")
        if end is None and max_trials is not None and done >= int(max_trials) and active == 0:
            end = ("Succeeded", "ExperimentMaxTrialsReached",
                   "Experiment has succeeded because max trial count has reached")
        assignments = None
        if end is None and active < parallel:
            want = parallel if max_trials is None else min(parallel, int(max_trials) - done)
            assignments = [self._suggest(spec, len(trials) + i) for i in range(max(0, want - active))]
            if None in assignments and active == 0 and not [a for a in assignments if a]:
                end = ("Succeeded", "ExperimentSuggestionEndReached", "Experiment has succeeded because "
                                                                      "suggestion service has reached the end")
        if end is None:
            conds = set_condition(conds, "Running", "True", "ExperimentRunning", "Experiment is running")
        else:
            conds = set_condition(conds, "Running", "False", end[1], end[2])
            conds = set_condition(conds, end[0], "True", end[1], end[2])
            status["completionTime"] = now()
        await self._write_status("experiments", self.experiments, exp, {**status, "conditions": conds})
        if end is not None:
            return
        if active > parallel:  # parallelism lowered: delete the newest active trials, as Katib does
            for name in (running + pending)[parallel - active:]:
                await self.kube.delete(KATIB.format(ns=self.ns, plural="trials") + f"/{name}")
        for values in assignments or []:
            if values is not None:
                await self._create_trial(exp, values)

    def _suggest(self, spec: dict, index: int) -> dict[str, str] | None:
        params = spec.get("parameters") or []
        if (spec.get("algorithm") or {}).get("algorithmName") == "grid":
            grid = itertools.product(*[_grid(p) for p in params])
            combo = next(itertools.islice(grid, index, None), None)
            return None if combo is None else {p["name"]: v for p, v in zip(params, combo)}
        return {p["name"]: self._draw(p) for p in params}

    def _draw(self, p: dict) -> str:
        space, kind = p.get("feasibleSpace") or {}, p.get("parameterType")
        if kind in ("categorical", "discrete"):
            return self.rng.choice(space["list"])
        low, high = float(space["min"]), float(space["max"])
        if kind == "int":
            return str(self.rng.randint(int(low), int(high)))
        if space.get("distribution") == "logUniform":
            return str(math.exp(self.rng.uniform(math.log(low), math.log(high))))
        return str(self.rng.uniform(low, high))

    async def _create_trial(self, exp: dict, values: dict[str, str]) -> None:
        meta, spec = exp["metadata"], exp["spec"]
        template = spec["trialTemplate"]
        name = f"{meta['name']}-{''.join(self.rng.choice(string.ascii_lowercase + string.digits) for _ in range(8))}"
        run_spec = copy.deepcopy(template["trialSpec"])
        kind = run_spec["kind"]
        refs = {p["name"]: p.get("reference", p["name"]) for p in template.get("trialParameters") or []}
        meta_refs = {"${trialSpec.Name}": name, "${trialSpec.Namespace}": self.ns, "${trialSpec.Kind}": kind,
                     "${trialSpec.APIVersion}": run_spec["apiVersion"]}

        def value(m: re.Match) -> str:
            ref = refs.get(m[1], m[1])
            return json.dumps(meta_refs[ref] if ref in meta_refs else values[ref])[1:-1]

        run_spec = json.loads(_PARAM_REF.sub(value, json.dumps(run_spec)))
        run_spec["metadata"] = {**(run_spec.get("metadata") or {}), "name": name, "namespace": self.ns}
        success, failure = DEFAULT_CONDITIONS.get(kind, ("Succeeded", "Failed"))
        trial_spec = {
            "objective": spec.get("objective") or {},
            "parameterAssignments": [{"name": k, "value": v} for k, v in values.items()],
            "runSpec": run_spec, "metricsCollector": spec.get("metricsCollectorSpec") or {"collector": {"kind": "StdOut"}},
            "successCondition": template.get("successCondition") or
            f'status.conditions.#(type=="{success}")#|#(status=="True")#',
            "failureCondition": template.get("failureCondition") or
            f'status.conditions.#(type=="{failure}")#|#(status=="True")#',
        }
        for key, to in (("primaryContainerName", "primaryContainerName"), ("primaryPodLabels", "primaryPodLabels"),
                        ("retain", "retainRun")):
            if template.get(key) is not None:
                trial_spec[to] = template[key]
        trial = {"apiVersion": "kubeflow.org/v1beta1", "kind": "Trial",
                 "metadata": {"name": name, "namespace": self.ns,
                              "labels": {**(meta.get("labels") or {}), EXPERIMENT_LABEL: meta["name"]},
                              "ownerReferences": [controller_ref(exp)]},
                 "spec": trial_spec}
        created = await self.kube.request("POST", KATIB.format(ns=self.ns, plural="trials"), trial)
        self.trials.put(created)  # Katib's expectations: never made twice

    def _optimal(self, spec: dict, succeeded: list[dict]) -> dict:
        objective = spec.get("objective") or {}
        metric, maximize = objective.get("objectiveMetricName"), objective.get("type") == "maximize"
        strategies = {s["name"]: s["value"] for s in objective.get("metricStrategies") or []}
        strategy = strategies.get(metric, "max" if maximize else "min")
        best, best_value = None, None
        for t in succeeded:
            m = next((m for m in (t["status"].get("observation") or {}).get("metrics") or [] if m["name"] == metric), None)
            if m is None:
                continue
            v = float(m[strategy])
            if best is None or (v > best_value if maximize else v < best_value):
                best, best_value = t, v
        if best is None:
            return {}
        return {"bestTrialName": best["metadata"]["name"], "parameterAssignments": best["spec"]["parameterAssignments"],
                "observation": best["status"]["observation"]}

    # ---- trials ------------------------------------------------------------------------------------
    async def reconcile_trial(self, trial: dict) -> None:
        meta, spec = trial["metadata"], trial["spec"]
        if meta.get("deletionTimestamp") or completed(trial):
            return
        status = copy.deepcopy(trial.get("status") or {})
        status.setdefault("startTime", now())
        conds = set_condition(status.get("conditions") or [], "Created", "True", "TrialCreated", "Trial is created")
        run_spec = spec["runSpec"]
        kind = run_spec["kind"]
        job = next((j for j in self.jobs[kind].items() if j["metadata"]["name"] == meta["name"]), None)
        if job is None:
            manifest = copy.deepcopy(run_spec)
            manifest["metadata"]["ownerReferences"] = [controller_ref(trial)]
            try:
                self.jobs[kind].put(await self.kube.request("POST", resource_path(kind, self.ns), manifest))
            except Conflict:
                pass
            return await self._write_status("trials", self.trials, trial, {**status, "conditions": conds})
        success, failure = (_COND_TYPE.search(spec.get(k) or "") for k in ("successCondition", "failureCondition"))
        if success and is_true(job, success[1]):
            observation = await self._observation(trial, job)
            status["observation"] = observation
            conds = set_condition(conds, "Running", "False", "TrialRunning", "Trial is running")
            if any(m["latest"] != "unavailable" for m in observation["metrics"]
                   if m["name"] == spec["objective"].get("objectiveMetricName")):
                conds = set_condition(conds, "Succeeded", "True", "TrialSucceeded", "Trial has succeeded")
            else:
                conds = set_condition(conds, "MetricsUnavailable", "True", "MetricsUnavailable",
                                      "Metrics are not available")
            status["completionTime"] = now()
        elif failure and is_true(job, failure[1]):
            conds = set_condition(conds, "Running", "False", "TrialRunning", "Trial is running")
            conds = set_condition(conds, "Failed", "True", "TrialFailed", "Trial has failed")
            status["completionTime"] = now()
        if status.get("completionTime") and not spec.get("retainRun"):  # Katib removes the run unless retained
            await self.kube.delete(resource_path(kind, self.ns, meta["name"]))
        elif is_true(job, "Running") or (kind == "Job" and (job.get("status") or {}).get("ready")):
            conds = set_condition(conds, "Running", "True", "TrialRunning", "Trial is running")
        await self._write_status("trials", self.trials, trial, {**status, "conditions": conds})

    async def _observation(self, trial: dict, job: dict) -> dict:
        """Katib's StdOut collector: ``name=value`` lines of the master pod's primary container."""
        spec, kind = trial["spec"], job["kind"]
        objective = spec.get("objective") or {}
        names = [objective.get("objectiveMetricName"), *(objective.get("additionalMetricNames") or [])]
        selector = (f"batch.kubernetes.io/job-name={job['metadata']['name']}" if kind == "Job" else
                    f"training.kubeflow.org/job-name={job['metadata']['name']},training.kubeflow.org/job-role=master")
        pods = (await self.kube.list(f"/api/v1/namespaces/{self.ns}/pods", labelSelector=selector)).get("items") or []
        values: dict[str, list[float]] = {n: [] for n in names if n}
        if pods:
            pod = pods[0]
            container = spec.get("primaryContainerName") or KINDS[kind][2] or pod["spec"]["containers"][0]["name"]
            text = await self._log(pod["metadata"]["name"], container)
            for line in text.splitlines():
                doc = _json(line)
                if doc is not None:  # a cloudml-hypertune line (what a File/JSON collector reads)
                    for n in values:
                        if _number(doc.get(n)) is not None:
                            values[n].append(_number(doc[n]))
                    continue
                for m in STDOUT_METRIC.finditer(line):
                    if m[1] in values and m[2] not in ("", "+", "-"):
                        values[m[1]].append(float(m[2]))
        metrics = []
        for name, seen in values.items():
            if seen:
                metrics.append({"name": name, "latest": _num(seen[-1]), "min": _num(min(seen)), "max": _num(max(seen))})
            else:
                metrics.append({"name": name, "latest": "unavailable", "min": "unavailable", "max": "unavailable"})
        return {"metrics": metrics}

    async def _log(self, pod: str, container: str) -> str:
        resp = await self.kube.api_client.call_api(
            f"/api/v1/namespaces/{self.ns}/pods/{pod}/log", "GET", query_params=[("container", container)],
            header_params={"Accept": "*/*"}, auth_settings=["BearerToken"], _preload_content=False)
        try:
            return (await resp.read()).decode() if resp.status == 200 else ""
        finally:
            resp.release()


def _grid(p: dict) -> list[str]:
    space = p.get("feasibleSpace") or {}
    if space.get("list"):
        return list(space["list"])
    low, high, step = float(space["min"]), float(space["max"]), float(space.get("step") or 1)
    count = int(math.floor((high - low) / step + 1e-9)) + 1
    values = [low + i * step for i in range(count)]
    return [str(int(v)) if p.get("parameterType") == "int" else _num(v) for v in values]


def _json(line: str) -> dict | None:
    try:
        doc = json.loads(line) if line.lstrip().startswith("{") else None
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _number(v) -> float | None:
    try:
        return float(v) if v is not None and not isinstance(v, bool) else None
    except (TypeError, ValueError):
        return None


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))
