/**
 * A sweep's trials as a table: best first, or sorted by the column the user chose (each header a
 * button; the sorted column carries `aria-sort`), one column per hyperparameter any trial has, and
 * (with `openLog`) a button per trial that opens its log.
 * Plain DOM; every string through `trans.__`.
 */

import { TranslationBundle } from '@jupyterlab/translation';

import { el } from './dom';
import { formatNumber, formatParam, Job, sortTrials } from './format';

export interface TrialSort {
  column: string;
  descending: boolean;
}

/**
 * The trials of `job` sorted by `sort`. A header's click asks `resort` for the table sorted by its
 * column (ascending, or the other way round when it was that column already), handing it this table
 * to replace.
 */
export function trialsTable(
  job: Job,
  sort: TrialSort,
  trans: TranslationBundle,
  resort: (next: TrialSort, table: HTMLTableElement) => void,
  openLog?: (trialId: string) => void
): HTMLTableElement {
  const rows = sortTrials(job, sort.column, sort.descending);
  const params = [...new Set(rows.flatMap(t => Object.keys(t.hyperparameters ?? {})))].sort();
  const metric = job.trainingInput?.hyperparameters?.hyperparameterMetricTag || trans.__('objective');
  const table = el('table', 'mlp-trials-table');
  table.append(
    el('caption', '', sort.column ? trans.__('Trials, sorted by %1', sort.column === 'metric' ? metric : sort.column)
      : trans.__('Trials, best first'))
  );
  const head = el('tr');
  const columns: [string, string][] = [
    ['trial', trans.__('Trial')],
    ['state', trans.__('State')],
    ['metric', metric],
    ...params.map(p => [p, p] as [string, string])
  ];
  for (const [key, label] of columns) {
    const th = el('th');
    th.scope = 'col';
    th.dataset.column = key;
    if (sort.column === key) {
      th.setAttribute('aria-sort', sort.descending ? 'descending' : 'ascending');
    }
    const button = el('button', 'mlp-sort', label);
    button.setAttribute('aria-label', trans.__('Sort trials by %1', label));
    button.addEventListener('click', () =>
      resort(sort.column === key ? { column: key, descending: !sort.descending } : { column: key, descending: false },
        table)
    );
    th.append(button);
    head.append(th);
  }
  if (openLog) {
    const th = el('th', '', trans.__('Log'));
    th.scope = 'col';
    head.append(th);
  }
  table.append(el('thead'));
  table.tHead!.append(head);
  const body = el('tbody');
  for (const t of rows) {
    const tr = el('tr', 'mlp-trial');
    tr.dataset.trialId = t.trialId;
    const v = t.finalMetric?.objectiveValue;
    for (const cell of [
      t.trialId,
      t.state ?? '',
      typeof v === 'number' ? formatNumber(v) : '',
      ...params.map(p => formatParam(t.hyperparameters?.[p]))
    ]) {
      tr.append(el('td', '', cell));
    }
    if (openLog) {
      const log = el('button', 'mlp-trial-log jp-mod-styled', trans.__('Log'));
      log.setAttribute('aria-label', trans.__('Open the log of trial %1', t.trialId));
      log.addEventListener('click', () => openLog(t.trialId));
      const td = el('td');
      td.append(log);
      tr.append(td);
    }
    body.append(tr);
  }
  table.append(body);
  return table;
}
