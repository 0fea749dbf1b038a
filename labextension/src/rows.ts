/**
 * The panel's jobs list: one row per job (its state badge, id, kind, and project, accelerator,
 * creation and run time), and the list moved through as a listbox: one row in the tab order,
 * the arrow keys, Home and End move, Enter or Space opens. Plain DOM; every string through
 * `trans.__`.
 */

import { TranslationBundle } from '@jupyterlab/translation';

import { el } from './dom';
import { Job, accelerator, badgeKind, explainState, formatTime, isSweep, runTime } from './format';

/** Opens a job's detail. */
export type Open = (project: string, jobId: string) => void;

/** The state badge of `job`, its title the state in plain words. */
export function badge(job: Job, trans: TranslationBundle): HTMLElement {
  const b = el('span', `mlp-badge mlp-badge-${badgeKind(job.state)}`, job.state ?? '?');
  b.title = explainState(job, trans);
  return b;
}

/** The row of `job` of `project` (an option of the listbox, out of the tab order), opened on click. */
export function jobRow(project: string, job: Job, trans: TranslationBundle, open: Open): HTMLLIElement {
  const li = el('li', 'mlp-row');
  const key = `${project}/${job.jobId}`;
  li.dataset.key = key;
  li.dataset.jobId = job.jobId;
  li.dataset.project = project;
  li.dataset.state = job.state ?? '';
  li.tabIndex = -1;
  li.setAttribute('role', 'option');
  li.setAttribute('aria-selected', 'false');
  li.setAttribute(
    'aria-label',
    trans.__('%1 in %2: %3', job.jobId, project, job.state ?? '')
  );
  const top = el('div', 'mlp-row-top');
  top.append(
    badge(job, trans),
    el('span', 'mlp-row-id', job.jobId),
    el('span', 'mlp-row-kind', isSweep(job) ? trans.__('sweep') : '')
  );
  const meta = el('div', 'mlp-row-meta');
  const bits = [project, accelerator(job, trans), formatTime(job.createTime)];
  const ran = runTime(job, Date.now(), trans);
  if (ran) {
    bits.push(trans.__('ran %1', ran));
  }
  meta.textContent = bits.filter(Boolean).join(' · ');
  li.append(top, meta);
  li.addEventListener('click', () => open(project, job.jobId));
  return li;
}

/** A key pressed in the list `listNode`: focus moves between its rows, Enter or Space opens one. */
export function onListKey(listNode: HTMLElement, e: KeyboardEvent, open: Open): void {
  const rows = [...listNode.querySelectorAll<HTMLElement>('.mlp-row')];
  const at = rows.indexOf(document.activeElement as HTMLElement);
  let next = -1;
  if (e.key === 'ArrowDown') {
    next = Math.min(rows.length - 1, at + 1);
  } else if (e.key === 'ArrowUp') {
    next = Math.max(0, at - 1);
  } else if (e.key === 'Home') {
    next = 0;
  } else if (e.key === 'End') {
    next = rows.length - 1;
  } else if ((e.key === 'Enter' || e.key === ' ') && at >= 0) {
    e.preventDefault();
    open(rows[at].dataset.project!, rows[at].dataset.jobId!);
    return;
  }
  if (next >= 0 && rows[next]) {
    e.preventDefault();
    rows.forEach(r => (r.tabIndex = -1));
    rows[next].tabIndex = 0;
    rows[next].focus();
  }
}
