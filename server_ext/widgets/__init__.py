"""Notebook widgets for the platform's jobs, clients of the notebook server's ml/v1 API (the kernel
inherits the server's URL and token; the server holds the one watch cache)::

    from server_ext import widgets
    widgets.jobs()              # the project's jobs, live; click a row for its detail
    widgets.job("my_job")       # one job: state timeline, live log, cancel
    widgets.sweep("my_sweep")   # a sweep's trials, objective and metric curves, best trial
    widgets.submit()            # the submission form

Each takes ``project=`` (default: ``$MLPLATFORM_PROJECT``, else the personal project of
``$JUPYTERHUB_USER``; outside a spawned server set ``MLPLATFORM_PROJECT`` or pass ``project=``).
Every widget of a kernel shares one poll per project (`sync.shared_poll`); updates reach the
browser as deltas (`protocol.md`); logs never pass through the kernel's stdout.
"""

from __future__ import annotations

from server_ext.client.notebook import connect

__all__ = ["jobs", "job", "sweep", "submit"]


def jobs(filter: str | None = None, project: str | None = None):
    """The project's jobs table (ml.v1 `filter`, e.g. ``labels.team=vision``), with the clicked
    job's detail below it. A `views.Browser`: ``.main`` is the `JobsTable`."""
    from server_ext.widgets.views import Browser, JobsTable

    client = connect(project)
    table = JobsTable(client, client.project, filter=filter)
    box = Browser(table, client, client.project)
    table.observe(lambda change: box.show(change["new"]), "selected")
    return box


def job(job_id: str, project: str | None = None, task: str | None = None):
    """A `JobDetail` of `job_id` (`task`: e.g. ``worker-replica-0``, a sweep's ``trial-3``)."""
    from server_ext.widgets.views import JobDetail

    client = connect(project)
    return JobDetail(client, job_id, client.project, task=task)


def sweep(job_id: str, project: str | None = None):
    """A `SweepMonitor` of the sweep `job_id`, a trial's log below it when one is opened (a
    `views.Browser`: ``.main`` is the monitor)."""
    from server_ext.widgets.views import sweep_browser

    client = connect(project)
    return sweep_browser(client, job_id, client.project)


def submit(project: str | None = None):
    """The job submission form."""
    from server_ext.widgets.form import SubmitForm

    return SubmitForm(connect(project))
