"""`SubmitForm`: the job submission form (plain ipywidgets), and its pure parts: `submit_arguments`
(form values → `Client.submit` arguments, which read them into the one description of a
submission, `server_ext.jobs.submission.Submission`, as the CLI's flags and the REST body are), `check_values` (every mistake of the form's values at
once), `field_of` (an error's field → the form field that shows it) and `error_places` (an error →
the messages shown next to each field and above the button).

Guarantees:

- Every mistake is shown at once: before sending, `check_values` runs the job model's own pure
  checks (`server_ext.jobs.model.parse_job`, the sweep spec's `parse_spec`) on each field on its
  own (job id, module, package, args, scale tier/machine/accelerator, sweep spec) and the form
  shows every problem next to its field, sending nothing; what only the server can check (the
  package's place, machine names of the operator's tables, the project) comes back in the
  server's answer, each of its ``fieldViolations`` (all of them, `server_ext.client.errors`)
  inline next to the field it names, anything else above the button; nothing is created on an
  error.
- The hyperparameter section is one YAML box on purpose: it takes an AI Platform
  ``hptuning_config.yaml`` as users already have it (the whole file or only its
  ``hyperparameters``, `sweep_spec`), checked by the same validation as any other field (an error
  inside it names its place, e.g. ``params[1].minValue``). Ticked while empty, it shows
  `SWEEP_TEMPLATE`, a spec that runs as it is and says where users have theirs.
- On success the new job's widget is shown below the form: a sweep's `SweepMonitor`, else its
  `JobDetail` (`JobHandle.widget`), and the scale-tier box shows the job's tier as the server
  recorded it.
- The scale-tier box is never stale: choosing a machine type or an accelerator makes it CUSTOM
  (as the job will be), and choosing another tier clears them (that tier fixes the machines).
- Credentials and datasets offered: the chosen project's (names only, from the same API); choosing
  another project unticks those ticked, and the note says which.
- Accelerators offered: only those the chosen project may use, each up to its limit
  (`form_choices.accelerator_offers`, from the hub's platform API read with the kernel's hub
  token: ``catalog``, ``projects`` and, on Kubernetes, ``capacity``); a note under the choice says
  plainly what a job gets (`form_choices.runtime_note`: on the local runtime, the notebook's own
  devices). An empty job id gets `server_ext.client.submissions.default_job_id`'s name.
- Every label is shown whole (one label width for all fields).
"""

from __future__ import annotations

import os
import shlex
from typing import Any, Mapping

import ipywidgets as w

from server_ext.errors import PlatformError, UserInputError
from server_ext.jobs.model import MAX_ACCELERATORS
from server_ext.widgets.form_choices import (
    CPU_ONLY,
    NO_ACCELERATOR,
    SWEEP_TEMPLATE,
    accelerator_offers,
    is_local,
    mount_choices,
    runtime_note,
    sweep_spec,
)

SCALE_TIERS = ("BASIC", "BASIC_GPU", "STANDARD_1", "PREMIUM_1", "CUSTOM")
_FIELDS = {  # error field (server or flag spelling) → form field
    "jobId": "job_id", "job_id": "job_id", "JOB": "job_id",
    "trainingInput.pythonModule": "module", "--module-name": "module",
    "package": "package_path", "package.path": "package_path", "--package-path": "package_path",
    "trainingInput.packageUris": "package_path", "--packages": "package_path",
    "trainingInput.args": "args", "trainingInput.scaleTier": "scale_tier", "--scale-tier": "scale_tier",
    "trainingInput.masterType": "machine_type", "--master-machine-type": "machine_type",
    "trainingInput.masterConfig.acceleratorConfig": "accelerator", "--master-accelerator": "accelerator",
    "mounts.credentials": "credentials", "--credentials": "credentials",
    "mounts.datasets": "datasets", "--datasets": "datasets",
    "trainingInput.hyperparameters": "hyperparameters", "project": "project",
    # submit()'s own argument names (errors found before sending)
    "module_name": "module", "package_path": "package_path", "packages": "package_path",
    "scale_tier": "scale_tier", "master_machine_type": "machine_type", "master_accelerator": "accelerator",
    "credentials": "credentials", "datasets": "datasets",
}


def _match(error_field: str) -> tuple[str, str]:
    """(the form field showing an error about `error_field`, where inside it: ``params[1].minValue``)."""
    field = error_field.removesuffix(" in config")
    for key in sorted(_FIELDS, key=len, reverse=True):
        if field == key or field.startswith(key + ".") or field.startswith(key + "["):
            return _FIELDS[key], field[len(key):].lstrip(".")
    return "", ""


def field_of(error_field: str) -> str:
    """The form field showing an error about `error_field` (``""``: above the button)."""
    return _match(error_field)[0]


def error_places(error: PlatformError) -> tuple[dict[str, list[str]], list[str]]:
    """Where the form shows `error`: ``({form field: [message, …]}, [messages above the button])``.
    Each field violation of a `UserInputError` (every one the server sent: ``violations``; else its
    one ``field``) goes next to the form field it names, prefixed by the place inside that field
    when there is one (``params[1].minValue: …``); one that names no form field, and any other
    error, goes above the button. Pure."""
    if not isinstance(error, UserInputError):
        return {}, [str(error)]
    inline: dict[str, list[str]] = {}
    above: list[str] = []
    for name, message in getattr(error, "violations", ()) or ((error.field, error.message),):
        field, inside = _match(name)
        if field:
            inline.setdefault(field, []).append(f"{inside}: {message}" if inside else message)
        else:
            above.append(f"{name}: {message}")
    return inline, above


def _several(problems: list[tuple[str, str]]) -> UserInputError:
    """One `UserInputError` carrying every ``(field, message)`` of `problems` as ``violations``."""
    error = UserInputError(*problems[0])
    error.violations = tuple(problems)
    return error


def _scale_tier(values: Mapping[str, Any]) -> str:
    """The job's tier: CUSTOM once a machine type or an accelerator is chosen (they need it)."""
    tier = values.get("scale_tier") or "BASIC"
    return "CUSTOM" if (values.get("accelerator") or (values.get("machine_type") or "").strip()) else tier


def _arguments(values: Mapping[str, Any]) -> tuple[list[str], Any, list[tuple[str, str]]]:
    """(the trainer's args, the sweep spec or None, the problems found reading them)."""
    import yaml

    problems: list[tuple[str, str]] = []
    try:
        args = shlex.split(values.get("args") or "")
    except ValueError as e:
        args = []
        problems.append(("trainingInput.args", f"cannot be split into words: {e}"))
    spec = None
    if values.get("hyperparameters_on") and (values.get("hyperparameters") or "").strip():
        try:
            spec = sweep_spec(yaml.safe_load(values["hyperparameters"]))
        except yaml.YAMLError:
            problems.append(("trainingInput.hyperparameters", "is not valid YAML"))
    return args, spec, problems


def submit_arguments(values: Mapping[str, Any]) -> tuple[dict, dict]:
    """(config, keyword arguments) of `Client.submit` for the form's values; a `UserInputError`
    carrying every problem of the args and the sweep spec (``violations``). Pure."""
    args, spec, problems = _arguments(values)
    if problems:
        raise _several(problems)
    ti: dict[str, Any] = {"scaleTier": _scale_tier(values)}
    if values.get("module"):
        ti["pythonModule"] = values["module"].strip()
    if args:
        ti["args"] = args
    if ti["scaleTier"] == "CUSTOM":
        ti["masterType"] = (values.get("machine_type") or "").strip() or "n1-standard-4"
    if values.get("accelerator"):
        ti["masterConfig"] = {"acceleratorConfig": {"type": values["accelerator"],
                                                    "count": str(int(values.get("accelerator_count") or 1))}}
    if spec is not None:
        ti["hyperparameters"] = spec
    kwargs: dict[str, Any] = {"job_id": (values.get("job_id") or "").strip() or None}
    if values.get("package_path"):
        kwargs["package_path"] = values["package_path"].strip()
    for name in ("credentials", "datasets"):
        if values.get(name):
            kwargs[name] = list(values[name])
    if values.get("project"):
        kwargs["project"] = values["project"]
    return {"trainingInput": ti}, kwargs


def check_values(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every problem of the form's values the job model finds, as ``(field, message)`` pairs in
    the form's order: each field is checked on its own (`parse_job` of a job whose other fields
    are sound), so one mistake never hides another. Pure."""
    from server_ext.jobs.model import parse_job

    problems: list[tuple[str, str]] = []

    def probe(form_field: str, training: dict, job_id: str = "j", shipped: bool = True) -> None:
        training = {k: v for k, v in {"pythonModule": "trainer.task", **training}.items() if v is not None}
        try:
            parse_job({"jobId": job_id, "trainingInput": training}, shipped_package=shipped)
        except UserInputError as e:
            if field_of(e.field) == form_field:
                problems.append((e.field, e.message))

    job_id = (values.get("job_id") or "").strip()
    if job_id:
        probe("job_id", {}, job_id=job_id)
    module = (values.get("module") or "").strip()
    probe("module", {"pythonModule": module} if module else {"pythonModule": None})
    probe("package_path", {}, shipped=bool((values.get("package_path") or "").strip()))
    args, spec, own = _arguments(values)
    problems += own
    if args:
        probe("args", {"args": args})
    try:
        config, _ = submit_arguments({k: v for k, v in values.items() if k not in ("args", "hyperparameters")})
        machines = {k: v for k, v in config["trainingInput"].items() if k not in ("pythonModule", "args")}
        for field in ("scale_tier", "machine_type", "accelerator"):
            probe(field, machines)
    except (UserInputError, ValueError, TypeError):
        pass
    if spec is not None:
        probe("hyperparameters", {"hyperparameters": spec})
    return problems


async def platform_info(env: Mapping[str, str] = os.environ) -> dict:
    """What the hub's platform API tells this user: ``{"catalog", "projects", "capacity",
    "credentials", "datasets"}``, each absent when it could not be read (no hub, no scope, timeout)."""
    import aiohttp

    api, token, user = env.get("JUPYTERHUB_API_URL"), env.get("JUPYTERHUB_API_TOKEN"), env.get("JUPYTERHUB_USER")
    if not (api and token and user):
        return {}
    out: dict[str, Any] = {}
    timeout = aiohttp.ClientTimeout(total=5)
    async with aiohttp.ClientSession(headers={"Authorization": f"token {token}"}, timeout=timeout) as s:
        for part in ("catalog", "projects", "capacity", "credentials", "datasets"):
            try:
                async with s.get(f"{api.rstrip('/')}/mlplatform/users/{user}/{part}") as r:
                    if r.status == 200:
                        out[part] = await r.json()
            except (aiohttp.ClientError, OSError, TimeoutError, ValueError):
                continue
    return out


LABEL_WIDTH = "150px"  # the longest label ("Package path", "Machine type") whole, with room to spare
PACKAGE_HINT = "trainer/trainer (after cp -r $MLPLATFORM_EXAMPLES/trainer .)"
class SubmitForm(w.VBox):
    """The form; `client` submits. `info` (platform_info's answer) may be given to skip the hub;
    `env` says the runtime and this server's profile (default: the kernel's environment)."""

    def __init__(self, client, info: Mapping | None = None, env: Mapping[str, str] | None = None):
        self.client = client
        self._env = os.environ if env is None else env
        if info is None:
            try:
                info = client.call(platform_info(), timeout=10)
            except Exception:  # the hub is optional here: fall back to the catalogue
                info = {}
        self._info = info
        projects = [p.get("name") for p in (info.get("projects") or {}).get("projects", []) if p.get("name")]
        style = {"description_width": LABEL_WIDTH}

        def field(kind, **kw):
            return kind(style=style, **kw)

        self.fields: dict[str, w.Widget] = {
            "job_id": field(w.Text, description="Job id", placeholder="default: <module>_<YYYYmmdd_HHMMSS>"),
            "module": field(w.Text, description="Module", placeholder="trainer.task"),
            "package_path": field(w.Text, description="Package path", placeholder=PACKAGE_HINT),
            "args": field(w.Text, description="Args", placeholder="--epochs=10 --learning_rate=0.01"),
            "scale_tier": field(w.Dropdown, description="Scale tier", options=SCALE_TIERS, value="BASIC"),
            "machine_type": field(w.Text, description="Machine type", placeholder="n1-standard-4 (makes it CUSTOM)"),
            "accelerator": field(w.Dropdown, description="Accelerator", options=[(CPU_ONLY, NO_ACCELERATOR)]),
            "accelerator_count": field(w.BoundedIntText, description="Count", value=1, min=1, max=MAX_ACCELERATORS),
            "project": (field(w.Dropdown, description="Project", options=projects, value=client.project
                              if client.project in projects else projects[0]) if projects
                        else field(w.Text, description="Project", value=client.project)),
            "credentials": field(w.SelectMultiple, description="Credentials", options=[]),
            "datasets": field(w.SelectMultiple, description="Datasets", options=[]),
            "hyperparameters_on": field(w.Checkbox, description="Hyperparameter sweep", value=False),
            "hyperparameters": field(w.Textarea, description="Sweep spec", placeholder="goal: MAXIMIZE\n"
                                     "hyperparameterMetricTag: accuracy\nmaxTrials: 4\nparams: [...]",
                                     layout=w.Layout(display="none")),
        }
        self.errors = {name: w.HTML() for name in self.fields}
        for name in self.fields:  # DOM hooks (protocol.md): .mlp-field-<name>, .mlp-error-<name>
            self.fields[name].add_class(f"mlp-field-{name}")
            self.errors[name].add_class(f"mlp-error-{name}")
        self.accelerator_note = w.HTML()
        self.accelerator_note.add_class("mlp-accelerator-note")
        self._most: dict[str, int] = {}
        self._offer()
        f = self.fields
        f["hyperparameters_on"].observe(self._sweep_ticked, "value")
        f["project"].observe(lambda _c: self._offer(), "value")
        f["accelerator"].observe(self._accelerator_set, "value")
        f["machine_type"].observe(lambda c: self._custom() if (c["new"] or "").strip() else None, "value")
        f["scale_tier"].observe(self._tier_set, "value")
        self.message = w.HTML()
        self.message.add_class("mlp-form-message")
        self.button = w.Button(description="Submit", button_style="primary")
        self.button.add_class("mlp-submit")
        self.button.on_click(lambda _b: self.submit())
        self.result = w.VBox()  # a column: the detail gets the form's width (a row: its longest log line's)
        self.result.add_class("mlp-submit-result")
        self.job = None
        rows = [w.HBox([self.fields[n], self.errors[n]]) for n in self.fields]
        at = list(self.fields).index("accelerator_count") + 1
        rows.insert(at, self.accelerator_note)
        super().__init__([*rows, self.message, self.button, self.result])
        self.add_class("mlp-submit-form")

    def _sweep_ticked(self, change) -> None:
        """Show the sweep box (with `SWEEP_TEMPLATE` when it is empty), or hide it."""
        box = self.fields["hyperparameters"]
        box.layout.display = None if change["new"] else "none"
        if change["new"] and not box.value.strip():
            box.value = SWEEP_TEMPLATE

    # ---- the accelerator choice and the scale tier follow each other
    def _offer(self) -> None:
        """Offer the accelerators, credentials and datasets of the chosen project; say what a job gets."""
        project = self.fields["project"].value or self.client.project
        offers, note = accelerator_offers(self._info, project, is_local(self._env))
        self._most = {o.value: o.most for o in offers}
        choice = self.fields["accelerator"]
        kept = choice.value if choice.value in self._most else NO_ACCELERATOR
        choice.options = [(o.label, o.value) for o in offers]
        choice.value = kept
        self._accelerator_set({"new": kept})
        lines = [runtime_note(self._info, self._env)] + ([note] if note else [])
        for kind in ("credentials", "datasets"):  # the chosen project's (a job mounts its project's only)
            names = mount_choices(self._info, project, kind)
            box = self.fields[kind]
            if box.value:  # another project's, even where a name is the same: never carried over silently
                lines.append(f"Unticked {kind} of the previous project: {', '.join(box.value)}.")
            box.value = ()
            box.options = names
        self.accelerator_note.value = "<br>".join(f"<span style='color:#616161'>{_escape(t)}</span>" for t in lines)

    def _accelerator_set(self, change: Mapping) -> None:
        count = self.fields["accelerator_count"]
        count.disabled = not change["new"]  # a count of nothing
        if change["new"]:
            most = self._most.get(change["new"]) or 1
            count.value = min(count.value, most)
            count.max = most
            self._custom()

    def _custom(self) -> None:
        self.fields["scale_tier"].value = "CUSTOM"

    def _tier_set(self, change: Mapping) -> None:
        if change["new"] != "CUSTOM":  # that tier fixes the machines
            self.fields["accelerator"].value = NO_ACCELERATOR
            self.fields["machine_type"].value = ""

    def close(self) -> None:
        for shown in self.result.children:
            shown.close()
        super().close()

    def values(self) -> dict:
        return {name: field.value for name, field in self.fields.items()}

    def show_error(self, error: PlatformError) -> None:
        """Each of the error's messages next to its field (`error_places`), the rest above the button."""
        inline, above = error_places(error)
        for name, label in self.errors.items():
            label.value = _red(inline.get(name, []))
        self.message.value = _red(above)

    def submit(self):
        """Submit the form's job; the handle, or None after showing every error inline."""
        values = self.values()
        try:
            problems = check_values(values)
            if problems:
                raise _several(problems)
            config, kwargs = submit_arguments(values)
            job = self.client.submit(config, **kwargs)
        except PlatformError as e:
            self.show_error(e)
            return None
        for label in self.errors.values():
            label.value = ""
        self.job = job
        tier = (job.job.get("trainingInput") or {}).get("scaleTier")
        if tier in SCALE_TIERS and tier != self.fields["scale_tier"].value:
            self.fields["scale_tier"].value = tier
        self.message.value = f"Submitted job <b>{_escape(job.id)}</b> ({_escape(job.job.get('state', ''))})"
        for shown in self.result.children:  # the previous job's widget stops following its job
            shown.close()
        self.result.children = [job.widget()]
        return job


def _escape(text: str) -> str:
    import html

    return html.escape(str(text))


def _red(messages: list[str]) -> str:
    """The messages, one a line, in the error colour (``""`` for none)."""
    return "<br>".join(f"<span style='color:#c62828'>{_escape(m)}</span>" for m in messages)
