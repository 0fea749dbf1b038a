/**
 * The side panel: the user's jobs and sweeps across their projects (a project switcher, a state
 * and text filter), and one job's detail (spec, state in plain words, trials best first, the
 * followed log, cancel). Plain DOM in a Lumino widget; every string through `trans.__`. Its parts:
 * the list's rows and keys (`rows`), a job's facts (`facts`), a sweep's trials table (`trials`),
 * the log (`logview`), the plots (`plots`).
 */

import { Dialog, showDialog } from '@jupyterlab/apputils';
import { TranslationBundle } from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';

import * as api from './api';
import { el } from './dom';
import { jobFacts, tickRunTime } from './facts';
import { Job, STATES, isActive, isSweep } from './format';
import { LogView } from './logview';
import { objectivePlot, seriesPlot } from './plots';
import { jobRow, onListKey } from './rows';
import { TrialSeriesStore } from './series';
import { JobsStore } from './store';
import { TrialSort, trialsTable } from './trials';

export interface PanelOptions {
  store: JobsStore;
  trans: TranslationBundle;
  logLines: () => number;
  /** Called when the selection changes, to save it in the state DB. */
  onSelect?: (sel: { project: string; jobId: string } | null) => void;
}

const ALL = '';
const SERIES_EVERY_MS = 2000;


export class JobsPanel extends Widget {
  private store: JobsStore;
  private trans: TranslationBundle;
  private opts: PanelOptions;
  private project = ALL;
  private projectSelect: HTMLSelectElement;
  private stateSelect: HTMLSelectElement;
  private textInput: HTMLInputElement;
  private listNode: HTMLElement;
  private emptyNode: HTMLElement;
  private listView: HTMLElement;
  private detailView: HTMLElement;
  private detailKey = '';
  private stopLog: (() => void) | null = null;
  private trialSort: TrialSort = { column: '', descending: false };
  /** The shown sweep's trials' metric series, read every `SERIES_EVERY_MS` while a trial runs. */
  private series = new TrialSeriesStore();
  private seriesTimer: number | null = null;
  /** The shown job, as last filled in; its "Ran for" is brought up to date every second (`tickRunTime`). */
  private detailJob: Job | undefined;
  private clockTimer: number | null = null;
  private seriesBusy = false;

  constructor(opts: PanelOptions) {
    super();
    this.opts = opts;
    this.store = opts.store;
    this.trans = opts.trans;
    const trans = this.trans;
    this.addClass('mlp-panel');
    this.id = 'mlplatform-jobs';
    this.title.caption = trans.__('Training jobs');
    this.node.setAttribute('role', 'region');
    this.node.setAttribute('aria-label', trans.__('Training jobs'));

    // the list view
    this.listView = el('div', 'mlp-list-view');
    const header = el('div', 'mlp-header');
    const heading = el('h2', 'mlp-title', trans.__('Training jobs'));
    const tools = el('div', 'mlp-tools');
    this.projectSelect = el('select', 'mlp-project jp-mod-styled');
    this.projectSelect.setAttribute('aria-label', trans.__('Project'));
    this.projectSelect.addEventListener('change', () => {
      this.project = this.projectSelect.value;
      this.renderList();
    });
    this.stateSelect = el('select', 'mlp-state-filter jp-mod-styled');
    this.stateSelect.setAttribute('aria-label', trans.__('Filter by state'));
    const any = el('option', '', trans.__('Any state'));
    any.value = '';
    this.stateSelect.appendChild(any);
    for (const s of STATES) {
      const o = el('option', '', s);
      o.value = s;
      this.stateSelect.appendChild(o);
    }
    this.stateSelect.addEventListener('change', () =>
      this.store.setFilter({ state: this.stateSelect.value })
    );
    this.textInput = el('input', 'mlp-text-filter jp-mod-styled');
    this.textInput.type = 'search';
    this.textInput.placeholder = trans.__('Filter jobs');
    this.textInput.setAttribute('aria-label', trans.__('Filter jobs by text'));
    this.textInput.addEventListener('input', () =>
      this.store.setFilter({ text: this.textInput.value })
    );
    tools.append(this.projectSelect, this.stateSelect, this.textInput);
    header.append(heading, tools);
    this.listNode = el('ul', 'mlp-jobs-list');
    this.listNode.setAttribute('role', 'listbox');
    this.listNode.setAttribute('aria-label', trans.__('Jobs'));
    this.listNode.addEventListener('keydown', e => onListKey(this.listNode, e, (p, j) => this.open(p, j)));
    this.emptyNode = el('p', 'mlp-empty');
    this.emptyNode.setAttribute('aria-live', 'polite');
    this.listView.append(header, this.listNode, this.emptyNode);

    this.detailView = el('div', 'mlp-detail-view');
    this.detailView.hidden = true;
    this.node.append(this.listView, this.detailView);

    this.store.onChange(() => this.render());
    this.render();
  }

  dispose(): void {
    this.stopLog?.();
    super.dispose();
  }

  private render(): void {
    this.renderProjects();
    const sel = this.store.selected;
    if (sel) {
      this.renderDetail(sel.project, sel.jobId);
    } else {
      this.closeDetail();
      this.renderList();
    }
  }

  private renderProjects(): void {
    const projects = this.store.projects;
    const wanted = [ALL, ...projects];
    const have = [...this.projectSelect.options].map(o => o.value);
    if (JSON.stringify(have) === JSON.stringify(wanted)) {
      return;
    }
    this.projectSelect.replaceChildren();
    for (const p of wanted) {
      const o = el('option', '', p === ALL ? this.trans.__('All projects') : p);
      o.value = p;
      this.projectSelect.appendChild(o);
    }
    this.projectSelect.value = wanted.includes(this.project) ? this.project : ALL;
  }

  /** Show one project (the default project setting) in the switcher. */
  setProject(project: string): void {
    this.project = project;
    this.projectSelect.value = project;
    this.renderList();
  }

  private renderList(): void {
    const trans = this.trans;
    const projects = this.project === ALL ? undefined : [this.project];
    const rows = this.store.visible(projects);
    const focused = (document.activeElement as HTMLElement | null)?.dataset?.key;
    const frag = document.createDocumentFragment();
    for (const { project, job } of rows) {
      frag.appendChild(jobRow(project, job, trans, (p, j) => this.open(p, j)));
    }
    this.listNode.replaceChildren(frag);
    const first = this.listNode.firstElementChild as HTMLElement | null;
    if (first) {
      first.tabIndex = 0;
    }
    if (focused) {
      const again = this.listNode.querySelector<HTMLElement>(`[data-key="${CSS.escape(focused)}"]`);
      if (again) {
        this.listNode.querySelectorAll<HTMLElement>('.mlp-row').forEach(r => (r.tabIndex = -1));
        again.tabIndex = 0;
        again.focus();
      }
    }
    const errors = this.store.projects.map(p => this.store.error(p)).filter(Boolean);
    this.emptyNode.textContent = errors.length
      ? errors.join(' ')
      : rows.length
        ? ''
        : this.store.all().length
          ? trans.__('No job matches the filter.')
          : trans.__('No jobs yet. Submit one from a notebook, the CLI or the REST API.');
  }

  open(project: string, jobId: string): void {
    this.store.select(project, jobId);
    this.opts.onSelect?.({ project, jobId });
  }

  back(): void {
    const sel = this.store.selected;
    this.store.select(null);
    this.opts.onSelect?.(null);
    if (sel) {
      this.listNode.querySelector<HTMLElement>(`[data-key="${CSS.escape(`${sel.project}/${sel.jobId}`)}"]`)?.focus();
    }
  }

  private closeDetail(): void {
    this.stopLog?.();
    this.stopLog = null;
    if (this.seriesTimer !== null) {
      window.clearInterval(this.seriesTimer);
      this.seriesTimer = null;
    }
    if (this.clockTimer !== null) {
      window.clearInterval(this.clockTimer);
      this.clockTimer = null;
    }
    this.detailJob = undefined;
    this.series.clear();
    this.detailKey = '';
    this.detailView.hidden = true;
    this.listView.hidden = false;
  }

  private renderDetail(project: string, jobId: string): void {
    const trans = this.trans;
    const job = this.store.job(project, jobId);
    const key = `${project}/${jobId}`;
    this.listView.hidden = true;
    this.detailView.hidden = false;
    if (this.detailKey !== key) {
      this.closeDetail();
      this.trialSort = { column: '', descending: false };
      this.listView.hidden = true;
      this.detailView.hidden = false;
      this.detailKey = key;
      this.detailView.replaceChildren();
      const head = el('div', 'mlp-detail-head');
      const back = el('button', 'mlp-back jp-mod-styled', trans.__('‹ All jobs'));
      back.setAttribute('aria-label', trans.__('Back to all jobs'));
      back.addEventListener('click', () => this.back());
      const title = el('h2', 'mlp-detail-title', jobId);
      const cancel = el('button', 'mlp-cancel jp-mod-styled jp-mod-warn', trans.__('Cancel job'));
      cancel.setAttribute('aria-label', trans.__('Cancel job %1', jobId));
      cancel.addEventListener('click', () => void this.cancel(project, jobId));
      head.append(back, title, cancel);
      const summary = el('div', 'mlp-detail-summary');
      summary.setAttribute('aria-live', 'polite');
      const trials = el('div', 'mlp-trials');
      const spec = el('details', 'mlp-spec');
      spec.append(el('summary', '', trans.__('Specification')), el('pre', 'mlp-spec-json'));
      const logArea = el('div', 'mlp-log-area');
      this.detailView.append(head, summary, trials, spec, logArea);
      this.seriesTimer = window.setInterval(() => void this.readSeries(project, jobId), SERIES_EVERY_MS);
      this.clockTimer = window.setInterval(() => {
        if (this.detailJob && isActive(this.detailJob)) {
          tickRunTime(this.detailView, this.detailJob, this.trans);
        }
      }, 1000);
      if (!job || !isSweep(job)) {
        this.showLog(logArea, project, jobId, 'master-replica-0');
      } else {
        logArea.append(el('p', 'mlp-log-hint', trans.__("A trial's Log button shows its log here.")));
      }
      back.focus();
    }
    this.fillDetail(project, jobId, job);
  }

  private fillDetail(project: string, jobId: string, job: Job | undefined): void {
    const trans = this.trans;
    const summary = this.detailView.querySelector('.mlp-detail-summary')!;
    const cancel = this.detailView.querySelector<HTMLButtonElement>('.mlp-cancel')!;
    if (!job) {
      summary.textContent = trans.__('Loading…');
      cancel.disabled = true;
      return;
    }
    cancel.disabled = !isActive(job) || job.state === 'CANCELLING';
    this.detailJob = job;
    summary.replaceChildren(jobFacts(project, job, this.trans));
    this.detailView.querySelector('.mlp-spec-json')!.textContent = JSON.stringify(
      job.trainingInput ?? {},
      null,
      2
    );
    const trials = this.detailView.querySelector('.mlp-trials')!;
    if (isSweep(job)) {
      const scroll = el('div', 'mlp-trials-scroll');
      scroll.append(this.trialsTable(job));
      trials.replaceChildren(objectivePlot(job, this.trans), seriesPlot(job, this.series.lines(job), this.trans), scroll);
      void this.readSeries(project, jobId); // a trial that just started or ended: read it now
    }
    void jobId;
  }

  /**
   * Read the series of the shown sweep's trials that may have grown (`TrialSeriesStore.due`), one
   * request at a time, and draw the series plot again if a line changed.
   */
  private async readSeries(project: string, jobId: string): Promise<void> {
    const key = `${project}/${jobId}`;
    const job = this.store.job(project, jobId);
    if (this.seriesBusy || !job || !isSweep(job)) {
      return;
    }
    this.seriesBusy = true;
    let changed = false;
    try {
      for (const trialId of this.series.due(job)) {
        const state = job.trainingOutput?.trials?.find(t => t.trialId === trialId)?.state;
        try {
          const metrics = await api.trialMetrics(project, jobId, trialId);
          if (this.detailKey !== key) {
            return;
          }
          changed = this.series.set(trialId, state, metrics) || changed;
        } catch {
          // not readable now (e.g. the trial's pod is gone): tried again on the next round
        }
      }
    } finally {
      this.seriesBusy = false;
    }
    const now = this.store.job(project, jobId);
    const shown = this.detailView.querySelector('.mlp-series-plot');
    if (changed && now && shown && this.detailKey === key) {
      shown.replaceWith(seriesPlot(now, this.series.lines(now), this.trans));
    }
  }

  private trialsTable(job: Job): HTMLElement {
    const sel = this.store.selected;
    return trialsTable(
      job,
      this.trialSort,
      this.trans,
      (next, table) => {
        this.trialSort = next;
        const now = this.store.selected;
        const again = now && this.store.job(now.project, now.jobId);
        if (again) {
          table.replaceWith(this.trialsTable(again));
          this.detailView.querySelector<HTMLElement>(`th[data-column="${CSS.escape(next.column)}"] button`)?.focus();
        }
      },
      sel
        ? trialId => {
            const area = this.detailView.querySelector<HTMLElement>('.mlp-log-area');
            if (area) {
              this.showLog(area, sel.project, sel.jobId, `trial-${trialId}`);
              area.scrollIntoView({ block: 'nearest' });
            }
          }
        : undefined
    );
  }

  /** Follow `task`'s log in `area` (in place of what it showed), the log followed before stopped. */
  private showLog(area: HTMLElement, project: string, jobId: string, task: string): void {
    this.stopLog?.();
    const view = new LogView(Math.max(100, this.opts.logLines()), this.trans, api.logUrl(project, jobId, task, false));
    area.replaceChildren(el('h3', 'mlp-log-title', this.trans.__('Log (%1)', task)), view.node);
    this.stopLog = api.followLog(
      project,
      jobId,
      task,
      lines => view.append(lines),
      () => {
        void api.getJob(project, jobId).then(j => this.store.putJob(project, j)).catch(() => undefined);
      },
      message => view.setStatus(message)
    );
  }

  private async cancel(project: string, jobId: string): Promise<void> {
    const trans = this.trans;
    const answer = await showDialog({
      title: trans.__('Cancel job %1?', jobId),
      body: trans.__('Its processes are stopped and it ends as CANCELLED. This cannot be undone.'),
      buttons: [
        Dialog.cancelButton({ label: trans.__('Keep running') }),
        Dialog.warnButton({ label: trans.__('Cancel job') })
      ]
    });
    if (!answer.button.accept) {
      return;
    }
    try {
      await api.cancelJob(project, jobId);
      this.store.putJob(project, await api.getJob(project, jobId));
    } catch (e) {
      await showDialog({
        title: trans.__('Could not cancel %1', jobId),
        body: String((e as Error).message ?? e),
        buttons: [Dialog.okButton()]
      });
    }
  }
}
