"""The spawn form, rendered on the server, and its POST read back into `user_options`.

`render_form` is pure: projects, profiles and free capacity in, HTML out (Jinja2, autoescaped);
it lists the profiles usable in at least one of the user's projects, with their resources,
"N of M free" for accelerators, and a marker when none is free (where Kueue holds them, `QueueView`:
"free now" or "queue: N ahead", and a full one stays selectable: the server would wait); each
option's choices with their descriptions (jupyterhub-fancy-profiles' ``description``, tied to the select by
``aria-describedby``, and the free-form entry's ``description_in_choices``); and each project's
credentials and datasets, a dataset that is not ready with its state and the loader's message
(its progress while loading, the reason when failed: a failed one cannot be ticked).
`options_from_form` keeps only the chosen profile's fields and returns the flat `user_options` the
REST API also accepts:
``{"project": ..., "profile": ..., "<option>": ..., "<option>--unlisted-choice": ...,
"credentials": [...], "datasets": [...]}`` (credentials and datasets of the chosen project).
Nothing here decides what is allowed: `Runtime.plan` validates whatever arrives.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import jinja2

from hub_ext.core.entitlements import Project
from hub_ext.core.mounts import Available
from hub_ext.core.profiles import Profile

_env = jinja2.Environment(loader=jinja2.PackageLoader("hub_ext", "templates"),
                          autoescape=jinja2.select_autoescape(["html"]))


@dataclass(frozen=True)
class Row:
    profile: Profile
    resources: str
    capacity: str
    full: bool
    projects: str
    checked: bool


def describe_resources(p: Profile) -> str:
    parts = []
    if p.accelerator is not None:
        parts.append(f"{p.accelerator_count} × {p.accelerator.display_name}")
    if p.cpu_limit or p.cpu_guarantee:
        parts.append(f"{p.cpu_guarantee or 0:g}–{p.cpu_limit:g} CPU" if p.cpu_limit else f"{p.cpu_guarantee:g}+ CPU")
    if p.mem_limit or p.mem_guarantee:
        parts.append(f"{p.mem_guarantee or '0'}–{p.mem_limit} memory" if p.mem_limit else f"{p.mem_guarantee}+ memory")
    return ", ".join(parts) or "CPU only, no fixed limits"


@dataclass(frozen=True)
class QueueView:
    """Where Kueue holds the accelerators: the seconds a queued start may wait, and per (project,
    accelerator) how many of the project's workloads wait for it (a pair absent: not known)."""
    wait: float
    ahead: Mapping[tuple[str, str], int] = field(default_factory=dict)

    def words(self, acc: str, projects: list[Project]) -> str:
        """"queue: 2 ahead" ("queue: 2 ahead in Vision, 0 in NLP" over several projects); "" unknown."""
        known = [(proj.display_name, self.ahead[(proj.name, acc)])
                 for proj in projects if (proj.name, acc) in self.ahead]
        if not known:
            return ""
        if len(known) == 1:
            return f"queue: {known[0][1]} ahead"
        return "queue: " + ", ".join(f"{n} ahead in {name}" if i == 0 else f"{n} in {name}"
                                     for i, (name, n) in enumerate(known))


def capacity_text(p: Profile, capacity: Mapping[str, tuple[int, int]], queue: QueueView | None = None,
                  projects: list[Project] = ()) -> tuple[str, bool]:
    """("1 of 2 free", full?) for a profile's accelerator; ("", False) without one. Where Kueue holds
    the accelerators (`queue`), the text says whether the start would wait behind others in the
    `projects`' queues ("free now", "queue: N ahead"), and a full one is not full: the server
    would wait in the project's queue, for `queue.wait` at most."""
    acc = p.accelerator
    if acc is None:
        return "", False
    if acc.name not in capacity:
        return "free capacity unknown", False
    free, total = capacity[acc.name]
    full = free < p.accelerator_count
    if queue is not None and total >= p.accelerator_count:
        line = queue.words(acc.name, projects)
        if full:
            return (f"{free} of {total} free{f' — {line}' if line else ''} — your server would wait in the "
                    f"project's queue (up to {round(queue.wait / 60)} min) and start when its turn comes"), False
        if line and any(queue.ahead.get((proj.name, acc.name)) for proj in projects):
            return f"{free} of {total} free — {line}", False
        return f"{free} of {total} free now", False
    return f"{free} of {total} free" + (" — none available now" if full else ""), full


def render_form(projects: list[Project], profiles: tuple[Profile, ...],
                capacity: Mapping[str, tuple[int, int]], files: Mapping[str, Available] | None = None,
                queue: QueueView | None = None, hub_url: str = "/hub/") -> str:
    usable = [p for p in profiles if any(p.slug in proj.profiles for proj in projects)]
    default = next((p for p in usable if p.default), usable[0] if usable else None)
    rows = []
    for p in usable:
        offered = [proj for proj in projects if p.slug in proj.profiles]
        text, full = capacity_text(p, capacity, queue, offered)
        where = [proj.display_name for proj in offered]
        rows.append(Row(p, describe_resources(p), text, full,
                        ", ".join(where) if len(projects) > 1 else "", p is default))
    files = files or {}
    mounts = [(proj, files[proj.name]) for proj in projects
              if proj.name in files and (files[proj.name].credentials or files[proj.name].datasets)]
    # projects with nothing to mount yet: the form says where credentials and datasets are added
    empty = [proj for proj in projects if proj.name in files and proj not in [m[0] for m in mounts]]
    return _env.get_template("spawn_form.html").render(projects=projects, rows=rows, mounts=mounts, empty=empty,
                                                      hub_url=hub_url)


def options_from_form(formdata: Mapping[str, list[str]]) -> dict:
    def first(key: str) -> str | None:
        values = formdata.get(key) or []
        return values[0] if values else None

    out: dict[str, str] = {}
    for key in ("project", "profile"):
        value = first(key)
        if value:
            out[key] = value
    project = out.get("project")
    if project:
        for form_key, option in ((f"credential--{project}", "credentials"), (f"dataset--{project}", "datasets")):
            chosen = [v for v in formdata.get(form_key) or [] if v]
            if chosen:
                out[option] = chosen
    profile = out.get("profile")
    if profile:
        prefix = f"profile-option-{profile}--"
        for key in formdata:
            if key.startswith(prefix):
                value = first(key)
                if value not in (None, ""):
                    out[key[len(prefix):]] = value
    return out
