"""``ml/v1/projects/{project}/submitForm``: the notebook's submit widget's form
(`server_ext.widgets.form`), served for the JupyterLab panel's "Submit as training job", so both
have one source of truth (the same fields, choices, checks and error places):

    GET  …/submitForm   the form for `project`: ``{"scaleTiers", "accelerators": [{"value", "label",
                        "most"}], "notes", "credentials", "datasets", "projects", "maxAccelerators",
                        "fields", "sweepTemplate"}``; accelerators are the project's (`form_choices.accelerator_offers`
                        of what the hub's platform API tells this server, `form.platform_info`), the
                        notes say what a job gets (`form_choices.runtime_note`), ``fields`` maps an
                        error's field (the server's spelling) to the form field showing it
                        (`form._FIELDS`, matched as `form.field_of` does: a prefix up to ``.``/``[``);
                        ``sweepTemplate`` is what the sweep box shows once ticked while empty.
    POST …/submitForm   the form's values under the widget's names (``job_id``, ``module``,
                        ``package_path``, ``args``, ``scale_tier``, ``machine_type``, ``accelerator``,
                        ``accelerator_count``, ``credentials``, ``datasets``, ``hyperparameters_on``,
                        ``hyperparameters``): every mistake at once (`form.check_values`), then the
                        job the widget would submit (`form.submit_arguments`; an empty job id gets
                        `client.submissions.default_job_id`'s name), created as ``POST …/jobs`` creates
                        one. Answers the job; errors are Google's error JSON naming each field.

Handlers are thin, authenticated and authorized like every ``ml/v1`` handler (`handlers._Handler`).
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from server_ext.errors import UserInputError
from server_ext.rest.handlers import _Handler
from server_ext.rest.package_field import read_create_body

FORM_FIELDS = ("job_id", "module", "package_path", "args", "scale_tier", "machine_type", "accelerator",
               "accelerator_count", "project", "credentials", "datasets", "hyperparameters_on", "hyperparameters")


def form_choices(info: dict, project: str, env) -> dict:
    """The form's choices for `project` from `info` (`form.platform_info`'s answer). Pure."""
    from server_ext.jobs.model import MAX_ACCELERATORS
    from server_ext.widgets.form import _FIELDS, SCALE_TIERS
    from server_ext.widgets.form_choices import SWEEP_TEMPLATE, accelerator_offers, is_local, mount_choices, runtime_note

    offers, note = accelerator_offers(info, project, is_local(env))
    names = {kind: mount_choices(info, project, kind) for kind in ("credentials", "datasets")}
    projects = [p.get("name") for p in (info.get("projects") or {}).get("projects", []) if p.get("name")]
    return {"scaleTiers": list(SCALE_TIERS), "maxAccelerators": MAX_ACCELERATORS,
            "accelerators": [{"value": o.value, "label": o.label, "most": o.most} for o in offers],
            "notes": [runtime_note(info, env)] + ([note] if note else []),
            "credentials": names["credentials"], "datasets": names["datasets"], "projects": projects,
            "fields": dict(_FIELDS), "sweepTemplate": SWEEP_TEMPLATE}


def create_body(values: dict, now: datetime.datetime) -> dict:
    """The ``POST …/jobs`` body of the form's `values`, as the widget submits them; `UserInputError`
    carrying every mistake (``violations``). Pure."""
    from server_ext.client.submissions import default_job_id
    from server_ext.widgets.form import _several, check_values, submit_arguments

    if not isinstance(values, dict) or not set(values) <= set(FORM_FIELDS):
        unknown = sorted(set(values) - set(FORM_FIELDS)) if isinstance(values, dict) else []
        raise UserInputError(unknown[0] if unknown else "body",
                             "is not a field of the submit form" if unknown else "must be a JSON object")
    problems = check_values(values)
    if problems:
        raise _several(problems)
    config, kwargs = submit_arguments(values)
    module = config["trainingInput"].get("pythonModule")
    body: dict[str, Any] = {"jobId": kwargs.get("job_id") or default_job_id(module, now), **config}
    if kwargs.get("package_path"):
        body["package"] = {"path": kwargs["package_path"]}
    mounts = {k: kwargs[k] for k in ("credentials", "datasets") if kwargs.get(k)}
    if mounts:
        body["mounts"] = mounts
    return body


class SubmitFormHandler(_Handler):
    @web.authenticated
    @authorized("read")
    async def get(self, project: str):
        from server_ext.widgets.form import platform_info

        service = await self.service()
        await service._check(self.user, project)
        self.finish(json.dumps(form_choices(await platform_info(os.environ), project, os.environ)))

    @web.authenticated
    @authorized("write")
    async def post(self, project: str):
        service = await self.service()
        body = create_body(self.json_body(), datetime.datetime.now(datetime.timezone.utc))
        submission = read_create_body(body, project, pathlib.Path(self.serverapp.root_dir))
        self.finish(json.dumps(await service.create(self.user, project, submission)))


routes = [(r"/ml/v1/projects/(?P<project>[^/]+)/submitForm", SubmitFormHandler)]
