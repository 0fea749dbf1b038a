/**
 * One job's facts in its detail view, as a description list: its state (badge and plain words),
 * project, accelerator, times, for a sweep its trials' progress, and the trainer's last progress
 * report (a bar and `progressText`: docs/jobs.md "Progress"). A fact without a value is
 * left out; `tickRunTime` keeps "Ran for" going while a job runs. Plain DOM; every string through
 * `trans.__`.
 */

import { TranslationBundle } from '@jupyterlab/translation';

import { el } from './dom';
import { Job, accelerator, explainState, formatTime, isSweep, progressText, runTime, trialProgress } from './format';
import { badge } from './rows';

const RAN_FOR = 'mlp-ran-for';

/** The "Ran for" fact of `facts` brought up to `now` (a running job's time goes on between updates). */
export function tickRunTime(facts: ParentNode, job: Job, trans: TranslationBundle, now: number = Date.now()): void {
  const dd = facts.querySelector(`.${RAN_FOR}`);
  if (dd) {
    dd.textContent = runTime(job, now, trans);
  }
}

export function jobFacts(project: string, job: Job, trans: TranslationBundle): HTMLDListElement {
  const dl = el('dl', 'mlp-facts');
  const fact = (term: string, value: string | Node): HTMLElement | undefined => {
    if (!value) {
      return undefined;
    }
    dl.append(el('dt', '', term));
    const dd = el('dd');
    dd.append(value);
    dl.append(dd);
    return dd;
  };
  const state = el('span');
  state.append(badge(job, trans), ' ', explainState(job, trans));
  fact(trans.__('State'), state);
  fact(trans.__('Project'), project);
  fact(trans.__('Accelerator'), accelerator(job, trans));
  fact(trans.__('Created'), formatTime(job.createTime));
  fact(trans.__('Started'), formatTime(job.startTime));
  fact(trans.__('Ended'), formatTime(job.endTime));
  fact(trans.__('Ran for'), runTime(job, Date.now(), trans))?.classList.add(RAN_FOR); // ticks: `tickRunTime`
  if (isSweep(job)) {
    fact(trans.__('Trials'), trialProgress(job, trans));
  }
  const reported = job.trainingOutput?.progress;
  if (reported) {
    const box = el('span', 'mlp-train-progress');
    if (typeof reported.progressPercentage === 'number') {
      const bar = el('progress', 'mlp-progress-bar');
      bar.max = 100;
      bar.value = reported.progressPercentage;
      box.append(bar, ' ');
    }
    box.append(progressText(job, trans));
    fact(trans.__('Progress'), box);
  }
  return dl;
}
