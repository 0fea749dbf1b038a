"""`SubmitForm`: the job submission form (plain ipywidgets), and its pure parts: `submit_arguments`
(form values → `Client.submit` arguments), `field_of` (an error's field → the form field that
shows it) and `error_places` (an error → the messages shown next to each field and above the
button).

Guarantees:

- The form calls one service method (`Client.submit`); every check is the server's: each of an
  error's ``fieldViolations`` (all of them, `server_ext.client.errors`) is shown inline next to
  the field it names, anything else above the button; nothing is created on an error.
- The hyperparameter section is one YAML box on purpose: it takes an AI Platform
  ``hptuning_config.yaml``'s ``hyperparameters`` as users already have them, checked by the same
  server validation as any other field (an error inside it names its place, e.g. ``params[1].minValue``).
- On success the new job's widget is shown below the form: a sweep's `SweepMonitor`, else its
  `JobDetail` (`JobHandle.widget`).
- The accelerator count goes up to the model's `MAX_ACCELERATORS` per replica (64); an empty job
  id gets `server_ext.client.notebook.default_job_id`'s name.
- Accelerators offered: the hub's platform API's free capacity (``/hub/api/mlplatform/users/
  {user}/capacity``, with the kernel's hub token) when reachable, else the built-in catalogue's
  names; projects, credentials and datasets from the same API when reachable (names only).
"""

from __future__ import annotations

import os
import re
import shlex
from typing import Any, Mapping

import ipywidgets as w

from ..errors import PlatformError, UserInputError
from ..jobs.model import MAX_ACCELERATORS

SCALE_TIERS = ("BASIC", "BASIC_GPU", "STANDARD_1", "PREMIUM_1", "CUSTOM")
NO_ACCELERATOR = ""
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


def submit_arguments(values: Mapping[str, Any]) -> tuple[dict, dict]:
    """(config, keyword arguments) of `Client.submit` for the form's values. Pure."""
    import yaml

    ti: dict[str, Any] = {"scaleTier": values.get("scale_tier") or "BASIC"}
    if values.get("module"):
        ti["pythonModule"] = values["module"].strip()
    try:
        args = shlex.split(values.get("args") or "")
    except ValueError as e:
        raise UserInputError("trainingInput.args", f"cannot be split into words: {e}") from None
    if args:
        ti["args"] = args
    if ti["scaleTier"] == "CUSTOM" and values.get("machine_type"):
        ti["masterType"] = values["machine_type"].strip()
    if values.get("accelerator"):
        if ti["scaleTier"] != "CUSTOM":
            ti["scaleTier"], ti["masterType"] = "CUSTOM", values.get("machine_type") or "n1-standard-4"
        ti["masterConfig"] = {"acceleratorConfig": {"type": values["accelerator"],
                                                    "count": str(int(values.get("accelerator_count") or 1))}}
    if values.get("hyperparameters_on") and (values.get("hyperparameters") or "").strip():
        try:
            spec = yaml.safe_load(values["hyperparameters"])
        except yaml.YAMLError:
            raise UserInputError("trainingInput.hyperparameters", "is not valid YAML") from None
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


def accelerator_choices(capacity: Mapping[str, Mapping] | None) -> list[tuple[str, str]]:
    """Dropdown (label, value) pairs: free capacity when known, else the built-in catalogue."""
    from ..jobs.defaults import DEFAULT_ACCELERATORS
    from ..jobs.machines import Machines, mig_name

    out = [("none (CPU only)", NO_ACCELERATOR)]
    if capacity:
        for name, c in sorted(capacity.items()):
            if re.fullmatch(r"\d+g\.\d+gb", name):
                value = mig_name(name)
            elif name in DEFAULT_ACCELERATORS:
                value = min(Machines({name: DEFAULT_ACCELERATORS[name]}).names() or {name.upper()})
            else:
                value = name.upper()
            out.append((f"{value} ({c.get('free', '?')} of {c.get('total', '?')} free)", value))
        return out
    return out + [(n, n) for n in sorted(Machines(DEFAULT_ACCELERATORS).names())]


async def platform_info(env: Mapping[str, str] = os.environ) -> dict:
    """What the hub's platform API tells this user: ``{"capacity", "projects", "credentials",
    "datasets"}``, each absent when it could not be read (no hub, no scope, timeout)."""
    import aiohttp

    api, token, user = env.get("JUPYTERHUB_API_URL"), env.get("JUPYTERHUB_API_TOKEN"), env.get("JUPYTERHUB_USER")
    if not (api and token and user):
        return {}
    out: dict[str, Any] = {}
    timeout = aiohttp.ClientTimeout(total=5)
    async with aiohttp.ClientSession(headers={"Authorization": f"token {token}"}, timeout=timeout) as s:
        for part in ("capacity", "projects", "credentials", "datasets"):
            try:
                async with s.get(f"{api.rstrip('/')}/mlplatform/users/{user}/{part}") as r:
                    if r.status == 200:
                        out[part] = await r.json()
            except (aiohttp.ClientError, OSError, TimeoutError, ValueError):
                continue
    return out


class SubmitForm(w.VBox):
    """The form; `client` submits. `info` (platform_info's answer) may be given to skip the hub."""

    def __init__(self, client, info: Mapping | None = None):
        self.client = client
        if info is None:
            try:
                info = client.call(platform_info(), timeout=10)
            except Exception:  # the hub is optional here: fall back to the catalogue
                info = {}
        capacity = (info.get("capacity") or {}).get("accelerators")
        projects = [p.get("name") for p in (info.get("projects") or {}).get("projects", []) if p.get("name")]
        names = {k: sorted({c.get("name") for c in (info.get(k) or {}).get(k, []) if c.get("name")})
                 for k in ("credentials", "datasets")}
        self.fields: dict[str, w.Widget] = {
            "job_id": w.Text(description="Job id", placeholder="default: <module>_<YYYYmmdd_HHMMSS>"),
            "module": w.Text(description="Module", placeholder="trainer.task"),
            "package_path": w.Text(description="Package path", placeholder="trainer/ (inside the server's root)"),
            "args": w.Text(description="Args", placeholder="--epochs=10 --learning_rate=0.01"),
            "scale_tier": w.Dropdown(description="Scale tier", options=SCALE_TIERS, value="BASIC"),
            "machine_type": w.Text(description="Machine type", placeholder="n1-standard-4 (CUSTOM)"),
            "accelerator": w.Dropdown(description="Accelerator", options=accelerator_choices(capacity)),
            "accelerator_count": w.BoundedIntText(description="Count", value=1, min=1, max=MAX_ACCELERATORS),
            "project": (w.Dropdown(description="Project", options=projects, value=client.project
                                   if client.project in projects else projects[0]) if projects
                        else w.Text(description="Project", value=client.project)),
            "credentials": w.SelectMultiple(description="Credentials", options=names["credentials"]),
            "datasets": w.SelectMultiple(description="Datasets", options=names["datasets"]),
            "hyperparameters_on": w.Checkbox(description="Hyperparameter sweep", value=False),
            "hyperparameters": w.Textarea(description="Spec", placeholder="goal: MAXIMIZE\nhyperparameterMetricTag: "
                                          "accuracy\nmaxTrials: 4\nparams: [...]", layout=w.Layout(display="none")),
        }
        self.errors = {name: w.HTML() for name in self.fields}
        for name in self.fields:  # DOM hooks (protocol.md): .mlp-field-<name>, .mlp-error-<name>
            self.fields[name].add_class(f"mlp-field-{name}")
            self.errors[name].add_class(f"mlp-error-{name}")
        self.fields["hyperparameters_on"].observe(
            lambda c: setattr(self.fields["hyperparameters"].layout, "display", None if c["new"] else "none"), "value")
        self.message = w.HTML()
        self.message.add_class("mlp-form-message")
        self.button = w.Button(description="Submit", button_style="primary")
        self.button.add_class("mlp-submit")
        self.button.on_click(lambda _b: self.submit())
        self.result = w.VBox()  # a column: the detail gets the form's width (a row: its longest log line's)
        self.result.add_class("mlp-submit-result")
        self.job = None
        rows = [w.HBox([self.fields[n], self.errors[n]]) for n in self.fields]
        super().__init__([*rows, self.message, self.button, self.result])
        self.add_class("mlp-submit-form")

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
        """Submit the form's job; the handle, or None after showing the error inline."""
        try:
            config, kwargs = submit_arguments(self.values())
            job = self.client.submit(config, **kwargs)
        except PlatformError as e:
            self.show_error(e)
            return None
        for label in self.errors.values():
            label.value = ""
        self.job = job
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
