/**
 * jupyterhub-mlplatform's JupyterLab extension: the "Training jobs" side panel and the status-bar
 * count of running jobs. Talks only to the server extension's `ml/v1` REST + SSE API.
 */

import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { IFileBrowserFactory } from '@jupyterlab/filebrowser';
import { ILauncher } from '@jupyterlab/launcher';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStateDB } from '@jupyterlab/statedb';
import { IStatusBar } from '@jupyterlab/statusbar';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';
import { LabIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import * as api from './api';
import { JobsPanel } from './panel';
import { JobsStore } from './store';
import { SubmitForm } from './submit';
import { valuesForPath } from './submitvalues';

const PLUGIN_ID = 'jupyterhub-mlplatform:plugin';
const STATE_KEY = 'jupyterhub-mlplatform:selection';
const COMMAND = 'mlplatform:open-jobs';
const SUBMIT = 'mlplatform:submit-job';

const ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
<path class="jp-icon3" fill="#616161" d="M4 4h16v4H4zm0 6h10v4H4zm0 6h16v4H4zm12-6h4v4h-4z"/></svg>`;

export const jobsIcon = new LabIcon({ name: 'mlplatform:jobs', svgstr: ICON_SVG });

interface Settings {
  refresh: number;
  defaultProject: string;
  logLines: number;
}

const DEFAULTS: Settings = { refresh: 5, defaultProject: '', logLines: 10000 };

/**
 * Keeps the store current: the user's projects read now and then, and one `…/jobs:watch` stream
 * per project (the server sends the listing whenever it changes: no polling per row, nor per
 * project). A stream that fails is started again after a pause (reading the list once meanwhile);
 * a server without the stream (404) is read every `refresh` seconds instead.
 */
class Watcher {
  private streams = new Map<string, () => void>();
  private timers = new Map<string, number>();
  private projectsTimer: number | undefined;
  private stopped = false;

  constructor(private store: JobsStore, private settings: () => Settings) {}

  start(): void {
    void this.projects();
  }

  stop(): void {
    this.stopped = true;
    window.clearTimeout(this.projectsTimer);
    this.streams.forEach(stop => stop());
    this.timers.forEach(t => window.clearTimeout(t));
  }

  /** Read every project's list now (after a submit, say). */
  now(): void {
    for (const p of this.streams.keys()) {
      void this.read(p);
    }
  }

  private async projects(): Promise<void> {
    try {
      const projects = await api.projectsList();
      for (const gone of [...this.streams.keys()].filter(p => !projects.includes(p))) {
        this.streams.get(gone)?.();
        this.streams.delete(gone);
        window.clearTimeout(this.timers.get(gone));
        this.store.removeProject(gone);
      }
      for (const p of projects.filter(p => !this.streams.has(p))) {
        this.watch(p, 0);
      }
    } catch (e) {
      console.warn('mlplatform: could not list projects', e);
    }
    if (!this.stopped) {
      this.projectsTimer = window.setTimeout(() => void this.projects(), 60_000);
    }
  }

  private async read(project: string): Promise<void> {
    try {
      this.store.setJobs(project, await api.listJobs(project));
    } catch (e) {
      this.store.setError(project, `${project}: ${(e as Error).message}`);
    }
  }

  private watch(project: string, failures: number): void {
    const stop = api.watchJobs(
      project,
      jobs => {
        failures = 0;
        this.store.setJobs(project, jobs);
      },
      (message, status) => {
        if (this.stopped || !this.streams.has(project)) {
          return;
        }
        if (status === 404) {
          this.poll(project);
          return;
        }
        if (status) {
          this.store.setError(project, `${project}: ${message}`);
        }
        const pause = Math.min(30_000, 1000 * 2 ** Math.min(failures, 5));
        void this.read(project);
        this.timers.set(project, window.setTimeout(() => this.watch(project, failures + 1), pause));
      }
    );
    this.streams.set(project, stop);
  }

  private poll(project: string): void {
    void this.read(project).then(() => {
      if (!this.stopped && this.streams.has(project)) {
        const every = Math.max(1, this.settings().refresh) * 1000;
        this.timers.set(project, window.setTimeout(() => this.poll(project), every));
      }
    });
  }
}

class RunningStatus extends Widget {
  constructor(store: JobsStore, trans: ReturnType<ITranslator['load']>, open: () => void) {
    super();
    this.addClass('mlp-status');
    this.node.tabIndex = 0;
    this.node.setAttribute('role', 'button');
    const update = () => {
      const n = store.running;
      this.node.textContent = trans._n('%1 job running', '%1 jobs running', n);
      this.node.title = trans.__('Training jobs: click to open the panel');
      this.node.setAttribute('aria-label', this.node.textContent);
    };
    store.onChange(update);
    update();
    this.node.addEventListener('click', open);
    this.node.addEventListener('keydown', e => {
      if (e.key === 'Enter' || e.key === ' ') {
        e.preventDefault();
        open();
      }
    });
  }
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'Training jobs and sweeps of jupyterhub-mlplatform in a side panel', // not translated: plugin metadata, as JupyterLab's own
  autoStart: true,
  optional: [
    ICommandPalette,
    ILayoutRestorer,
    ISettingRegistry,
    IStateDB,
    IStatusBar,
    ITranslator,
    IFileBrowserFactory,
    ILauncher
  ],
  activate: async (
    app: JupyterFrontEnd,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null,
    registry: ISettingRegistry | null,
    stateDB: IStateDB | null,
    statusBar: IStatusBar | null,
    translator: ITranslator | null,
    browsers: IFileBrowserFactory | null,
    launcher: ILauncher | null
  ) => {
    const trans = (translator ?? nullTranslator).load('jupyterhub_mlplatform');
    let settings: Settings = { ...DEFAULTS };
    const store = new JobsStore();
    const panel = new JobsPanel({
      store,
      trans,
      logLines: () => settings.logLines,
      onSelect: sel => void stateDB?.save(STATE_KEY, sel ? { ...sel } : null)
    });
    panel.title.icon = jobsIcon;
    app.shell.add(panel, 'left', { rank: 600 });

    app.commands.addCommand(COMMAND, {
      label: trans.__('Training jobs'),
      caption: trans.__('Show the training jobs and sweeps panel'),
      icon: jobsIcon,
      // args {project, jobId} (optional): open that job's detail, e.g. one just created elsewhere
      execute: args => {
        app.shell.activateById(panel.id);
        const { project, jobId } = args as { project?: unknown; jobId?: unknown };
        if (typeof project === 'string' && typeof jobId === 'string' && project && jobId) {
          panel.open(project, jobId);
          if (!store.job(project, jobId)) {
            void api.getJob(project, jobId).then(job => store.putJob(project, job)).catch(() => undefined);
          }
        }
      }
    });
    palette?.addItem({ command: COMMAND, category: trans.__('Training') });
    restorer?.add(panel, 'mlplatform-jobs');

    if (registry) {
      try {
        const s = await registry.load(PLUGIN_ID);
        const read = () => {
          settings = { ...DEFAULTS, ...(s.composite as Partial<Settings>) };
        };
        read();
        s.changed.connect(read);
      } catch (e) {
        console.warn('mlplatform: settings not loaded', e);
      }
    }
    if (settings.defaultProject) {
      panel.setProject(settings.defaultProject);
    }
    if (statusBar) {
      statusBar.registerStatusItem('jupyterhub-mlplatform:running', {
        item: new RunningStatus(store, trans, () => app.shell.activateById(panel.id)),
        align: 'left',
        rank: 5
      });
    }
    const poller = new Watcher(store, () => settings);
    poller.start();

    // "Submit as training job": the notebook widget's form (the server's), from a file's context
    // menu, an open document's, the palette and the launcher
    const pathFor = (args: { path?: unknown }): string => {
      if (typeof args.path === 'string') {
        return args.path;
      }
      const item = browsers?.tracker.currentWidget?.selectedItems().next();
      if (item && !item.done && item.value && app.contextMenuHitTest(n => n.classList.contains('jp-DirListing-item'))) {
        return item.value.path;
      }
      const current = app.shell.currentWidget as unknown as { context?: { path?: string } } | null;
      return current?.context?.path ?? '';
    };
    app.commands.addCommand(SUBMIT, {
      label: trans.__('Submit as training job…'),
      caption: trans.__('Submit this code as a training job (the notebook widget\'s form)'),
      icon: jobsIcon,
      execute: async args => {
        let projects: string[] = [];
        try {
          projects = await api.projectsList();
        } catch {
          projects = store.projects;
        }
        if (settings.defaultProject && projects.includes(settings.defaultProject)) {
          projects = [settings.defaultProject, ...projects.filter(p => p !== settings.defaultProject)];
        }
        const form = new SubmitForm(trans, projects, valuesForPath(pathFor(args as { path?: unknown })), (project, jobId) => {
          poller.now();
          app.shell.activateById(panel.id);
          panel.open(project, jobId);
        });
        app.shell.add(form, 'main');
        app.shell.activateById(form.id);
      }
    });
    palette?.addItem({ command: SUBMIT, category: trans.__('Training') });
    app.contextMenu.addItem({ command: SUBMIT, selector: '.jp-DirListing-item[data-isdir="false"]', rank: 20 });
    app.contextMenu.addItem({ command: SUBMIT, selector: '.jp-Notebook', rank: 20 });
    app.contextMenu.addItem({ command: SUBMIT, selector: '.jp-FileEditor', rank: 20 });
    launcher?.add({ command: SUBMIT, category: trans.__('Other'), rank: 50 });
    if (stateDB) {
      void app.restored.then(async () => {
        const saved = (await stateDB.fetch(STATE_KEY)) as { project?: string; jobId?: string } | undefined;
        if (saved && saved.project && saved.jobId) {
          panel.open(saved.project, saved.jobId);
          if (!store.job(saved.project, saved.jobId)) {
            try {
              store.putJob(saved.project, await api.getJob(saved.project, saved.jobId));
            } catch {
              panel.back();
            }
          }
        }
      });
    }
  }
};

export default plugin;
