/**
 * One job's facts in its detail view, as a description list: its state (badge and plain words),
 * project, accelerator, times and, for a sweep, its trials' progress. A fact without a value is
 * left out. Plain DOM; every string through `trans.__`.
 */

import { TranslationBundle } from '@jupyterlab/translation';

import { el } from './dom';
import { Job, accelerator, explainState, formatTime, isSweep, runTime, trialProgress } from './format';
import { badge } from './rows';

export function jobFacts(project: string, job: Job, trans: TranslationBundle): HTMLDListElement {
  const dl = el('dl', 'mlp-facts');
  const fact = (term: string, value: string | Node) => {
    if (!value) {
      return;
    }
    dl.append(el('dt', '', term));
    const dd = el('dd');
    dd.append(value);
    dl.append(dd);
  };
  const state = el('span');
  state.append(badge(job, trans), ' ', explainState(job, trans));
  fact(trans.__('State'), state);
  fact(trans.__('Project'), project);
  fact(trans.__('Accelerator'), accelerator(job, trans));
  fact(trans.__('Created'), formatTime(job.createTime));
  fact(trans.__('Started'), formatTime(job.startTime));
  fact(trans.__('Ended'), formatTime(job.endTime));
  fact(trans.__('Ran for'), runTime(job, Date.now(), trans));
  if (isSweep(job)) {
    fact(trans.__('Trials'), trialProgress(job, trans));
  }
  return dl;
}
