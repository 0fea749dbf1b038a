/**
 * "Submit as training job": the notebook widget's submit form in a main-area tab. Its fields,
 * choices (scale tiers, the project's accelerators with their limits, credentials, datasets) and
 * checks are the server's (`GET/POST …/submitForm`, server_ext/rest/submit_form.py, which runs the
 * widget's own code); every error the server names is shown next to its field.
 */

import { TranslationBundle } from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';

import * as api from './api';
import { FIELD_NAMES, FormValues, emptyValues, errorPlaces } from './submitvalues';

type Control = HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement;

let counter = 0;

export class SubmitForm extends Widget {
  private controls = new Map<keyof FormValues, Control>();
  private errors = new Map<string, HTMLElement>();
  private notes: HTMLElement;
  private message: HTMLElement;
  private button: HTMLButtonElement;
  private choices: api.SubmitFormChoices | null = null;
  private most = new Map<string, number>();

  constructor(
    private trans: TranslationBundle,
    projects: string[],
    initial: Partial<FormValues>,
    private onSubmitted: (project: string, jobId: string) => void
  ) {
    super();
    const n = ++counter;
    this.id = `mlplatform-submit-${n}`;
    this.addClass('mlp-submit-form');
    this.title.label = trans.__('Submit training job');
    this.title.closable = true;
    const values = { ...emptyValues(projects[0] ?? ''), ...initial };
    const form = document.createElement('form');
    form.noValidate = true;
    form.setAttribute('aria-label', trans.__('Submit training job'));
    const heading = document.createElement('h2');
    heading.textContent = trans.__('Submit as training job');
    form.appendChild(heading);
    const labels: Record<keyof FormValues, string> = {
      job_id: trans.__('Job id'),
      module: trans.__('Module'),
      package_path: trans.__('Package path'),
      args: trans.__('Args'),
      scale_tier: trans.__('Scale tier'),
      machine_type: trans.__('Machine type'),
      accelerator: trans.__('Accelerator'),
      accelerator_count: trans.__('Count'),
      project: trans.__('Project'),
      credentials: trans.__('Credentials'),
      datasets: trans.__('Datasets'),
      hyperparameters_on: trans.__('Hyperparameter sweep'),
      hyperparameters: trans.__('Sweep spec')
    };
    const placeholders: Partial<Record<keyof FormValues, string>> = {
      job_id: trans.__('default: <module>_<YYYYmmdd_HHMMSS>'),
      module: 'trainer.task',
      package_path: 'trainer/trainer',
      args: '--epochs=10 --learning_rate=0.01',
      machine_type: trans.__('n1-standard-4 (makes it CUSTOM)'),
      hyperparameters: 'goal: MAXIMIZE\nhyperparameterMetricTag: accuracy\nmaxTrials: 4\nparams: [...]'
    };
    for (const name of FIELD_NAMES) {
      const row = document.createElement('div');
      row.className = `mlp-form-row mlp-row-${name}`;
      const id = `${this.id}-${name}`;
      const label = document.createElement('label');
      label.htmlFor = id;
      label.textContent = labels[name];
      let control: Control;
      if (name === 'scale_tier' || name === 'accelerator' || name === 'project') {
        control = document.createElement('select');
      } else if (name === 'credentials' || name === 'datasets') {
        control = document.createElement('select');
        (control as HTMLSelectElement).multiple = true;
      } else if (name === 'hyperparameters') {
        control = document.createElement('textarea');
        (control as HTMLTextAreaElement).rows = 6;
      } else {
        control = document.createElement('input');
        (control as HTMLInputElement).type =
          name === 'accelerator_count' ? 'number' : name === 'hyperparameters_on' ? 'checkbox' : 'text';
      }
      control.id = id;
      control.name = name;
      control.classList.add(`mlp-field-${name}`, 'jp-mod-styled');
      if (placeholders[name] && 'placeholder' in control) {
        control.placeholder = placeholders[name]!;
      }
      const error = document.createElement('div');
      error.className = `mlp-field-error mlp-error-${name}`;
      error.id = `${id}-error`;
      error.setAttribute('aria-live', 'polite');
      control.setAttribute('aria-describedby', error.id);
      row.append(label, control, error);
      form.appendChild(row);
      this.controls.set(name, control);
      this.errors.set(name, error);
    }
    this.notes = document.createElement('div');
    this.notes.className = 'mlp-form-notes';
    this.controls.get('accelerator_count')!.closest('.mlp-form-row')!.after(this.notes);
    this.message = document.createElement('div');
    this.message.className = 'mlp-form-message';
    this.message.setAttribute('role', 'status');
    this.button = document.createElement('button');
    this.button.type = 'submit';
    this.button.className = 'mlp-submit jp-mod-styled jp-mod-accept';
    this.button.textContent = trans.__('Submit');
    form.append(this.message, this.button);
    form.addEventListener('submit', e => {
      e.preventDefault();
      void this.submit();
    });
    this.node.appendChild(form);

    const project = this.controls.get('project') as HTMLSelectElement;
    this.options(project, projects.map(p => [p, p]));
    this.set(values);
    project.addEventListener('change', () => void this.load(project.value));
    this.controls.get('accelerator')!.addEventListener('change', () => this.acceleratorSet());
    this.controls.get('machine_type')!.addEventListener('input', () => {
      if (this.controls.get('machine_type')!.value.trim()) {
        this.controls.get('scale_tier')!.value = 'CUSTOM';
      }
    });
    this.controls.get('scale_tier')!.addEventListener('change', () => {
      if (this.controls.get('scale_tier')!.value !== 'CUSTOM') {
        this.controls.get('accelerator')!.value = '';
        this.controls.get('machine_type')!.value = '';
        this.acceleratorSet();
      }
    });
    const sweep = this.controls.get('hyperparameters_on') as HTMLInputElement;
    const spec = this.controls.get('hyperparameters') as HTMLTextAreaElement;
    const showSpec = () => {
      (spec.closest('.mlp-form-row') as HTMLElement).hidden = !sweep.checked;
      if (sweep.checked && !spec.value.trim() && this.choices?.sweepTemplate) {
        spec.value = this.choices.sweepTemplate; // a spec that runs as it is, saying where users have theirs
      }
    };
    sweep.addEventListener('change', showSpec);
    showSpec();
    void this.load(values.project, values);
  }

  private options(select: HTMLSelectElement, items: [string, string][]): void {
    const kept = [...select.selectedOptions].map(o => o.value);
    select.replaceChildren(
      ...items.map(([value, label]) => {
        const o = document.createElement('option');
        o.value = value;
        o.textContent = label;
        o.selected = kept.includes(value);
        return o;
      })
    );
  }

  private set(values: Partial<FormValues>): void {
    for (const [name, value] of Object.entries(values) as [keyof FormValues, unknown][]) {
      const c = this.controls.get(name);
      if (!c) {
        continue;
      }
      if (c instanceof HTMLInputElement && c.type === 'checkbox') {
        c.checked = !!value;
      } else if (c instanceof HTMLSelectElement && c.multiple) {
        const chosen = new Set(value as string[]);
        [...c.options].forEach(o => (o.selected = chosen.has(o.value)));
      } else {
        c.value = String(value);
      }
    }
  }

  values(): FormValues {
    const out: Record<string, unknown> = {};
    for (const [name, c] of this.controls) {
      if (c instanceof HTMLInputElement && c.type === 'checkbox') {
        out[name] = c.checked;
      } else if (c instanceof HTMLSelectElement && c.multiple) {
        out[name] = [...c.selectedOptions].map(o => o.value);
      } else if (name === 'accelerator_count') {
        out[name] = Number(c.value) || 1;
      } else {
        out[name] = c.value;
      }
    }
    return out as FormValues;
  }

  /** The project's choices from the server (the widget's own). */
  private async load(project: string, values?: Partial<FormValues>): Promise<void> {
    try {
      this.choices = await api.submitFormChoices(project);
    } catch (e) {
      this.message.textContent = (e as Error).message;
      return;
    }
    const c = this.choices;
    this.options(this.controls.get('scale_tier') as HTMLSelectElement, c.scaleTiers.map(t => [t, t]));
    this.options(this.controls.get('accelerator') as HTMLSelectElement, c.accelerators.map(a => [a.value, a.label]));
    this.most = new Map(c.accelerators.map(a => [a.value, a.most]));
    this.options(this.controls.get('credentials') as HTMLSelectElement, c.credentials.map(n => [n, n]));
    this.options(this.controls.get('datasets') as HTMLSelectElement, c.datasets.map(n => [n, n]));
    (this.controls.get('accelerator_count') as HTMLInputElement).min = '1';
    this.set(values ?? { scale_tier: this.controls.get('scale_tier')!.value || 'BASIC' });
    this.notes.replaceChildren(
      ...c.notes.map(t => {
        const p = document.createElement('p');
        p.textContent = t;
        return p;
      })
    );
    this.acceleratorSet();
  }

  private acceleratorSet(): void {
    const acc = this.controls.get('accelerator')!.value;
    const count = this.controls.get('accelerator_count') as HTMLInputElement;
    count.disabled = !acc;
    if (acc) {
      const most = this.most.get(acc) || 1;
      count.max = String(most);
      count.value = String(Math.min(Number(count.value) || 1, most));
      this.controls.get('scale_tier')!.value = 'CUSTOM';
    }
  }

  async submit(): Promise<void> {
    const trans = this.trans;
    const values = this.values();
    this.errors.forEach(e => (e.textContent = ''));
    this.controls.forEach(c => c.removeAttribute('aria-invalid'));
    this.message.textContent = trans.__('Submitting…');
    this.button.disabled = true;
    try {
      const job = await api.submitForm(values.project, values);
      this.message.textContent = trans.__('Submitted job %1 (%2)', job.jobId, job.state ?? '');
      this.onSubmitted(values.project, job.jobId);
    } catch (e) {
      const err = e as api.ApiError;
      const { inline, above } = errorPlaces(err.fields ?? [], err.message, this.choices?.fields ?? {});
      for (const [field, messages] of Object.entries(inline)) {
        const place = this.errors.get(field);
        if (place) {
          place.textContent = messages.join(' ');
          this.controls.get(field as keyof FormValues)?.setAttribute('aria-invalid', 'true');
        } else {
          above.push(...messages);
        }
      }
      this.message.textContent = above.join(' ');
    } finally {
      this.button.disabled = false;
    }
  }
}
