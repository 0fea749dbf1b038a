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

/** Lists the projects now and then, and each project's jobs every `refresh` seconds: one request
 * per project, never one per row (a job's log is a stream of its own). */
class Poller {
  private timer: number | undefined;
  private projects: string[] = [];
  private projectsAt = 0;
  private stopped = false;

  constructor(private store: JobsStore, private settings: () => Settings) {}

  start(): void {
    void this.tick();
  }

  stop(): void {
    this.stopped = true;
    window.clearTimeout(this.timer);
  }

  /** List again now (after a submit, say). */
  now(): void {
    window.clearTimeout(this.timer);
    void this.tick();
  }

  private async tick(): Promise<void> {
    try {
      if (!this.projects.length || Date.now() - this.projectsAt > 60_000) {
        const body = await api.projectsList();
        this.projects = body;
        this.projectsAt = Date.now();
        for (const gone of this.store.projects.filter(p => !body.includes(p))) {
          this.store.removeProject(gone);
        }
      }
      await Promise.all(
        this.projects.map(async p => {
          try {
            this.store.setJobs(p, await api.listJobs(p));
          } catch (e) {
            this.store.setError(p, `${p}: ${(e as Error).message}`);
          }
        })
      );
    } catch (e) {
      console.warn('mlplatform: could not list projects', e);
    }
    if (!this.stopped) {
      const every = Math.max(1, this.settings().refresh) * 1000;
      // hidden tab: slower; nothing can change by itself: slower still
      const factor = document.visibilityState === 'hidden' ? 6 : this.store.active ? 1 : 2;
      this.timer = window.setTimeout(() => void this.tick(), every * factor);
    }
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
  description: 'Training jobs and sweeps of jupyterhub-mlplatform in a side panel',
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
      execute: () => app.shell.activateById(panel.id)
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
    const poller = new Poller(store, () => settings);
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
