/**
 * Pure formatting of `ml.v1` jobs for the panel: states, times, accelerators, plain-words
 * explanations, trial ordering. No DOM, no JupyterLab: unit tested in test/format.test.ts. Words
 * go through `trans` (the panel passes JupyterLab's translation bundle; `english` by default).
 */

/** What formatting needs of JupyterLab's `TranslationBundle`: `__` and `_n` (`%1`, `%2` replaced by the arguments). */
export interface Translate {
  __(msgid: string, ...args: any[]): string;
  _n(msgid: string, msgidPlural: string, n: number, ...args: any[]): string;
}

function fill(msg: string, args: unknown[]): string {
  return msg.replace(/%(\d+)/g, (m, i) => (Number(i) <= args.length ? String(args[Number(i) - 1]) : m));
}

/** No translation: the message with its arguments in place (as JupyterLab's `nullTranslator`). */
export const english: Translate = {
  __: (msgid, ...args) => fill(msgid, args),
  _n: (msgid, plural, n, ...args) => fill(n === 1 ? msgid : plural, [n, ...args])
};

export type JobState =
  | 'STATE_UNSPECIFIED'
  | 'QUEUED'
  | 'PREPARING'
  | 'RUNNING'
  | 'SUCCEEDED'
  | 'FAILED'
  | 'CANCELLING'
  | 'CANCELLED';

export const STATES: JobState[] = [
  'QUEUED',
  'PREPARING',
  'RUNNING',
  'SUCCEEDED',
  'FAILED',
  'CANCELLING',
  'CANCELLED'
];

/** The states a job can still leave (cancel is offered, logs may grow). */
export const ACTIVE_STATES: ReadonlySet<string> = new Set([
  'QUEUED',
  'PREPARING',
  'RUNNING',
  'CANCELLING'
]);

export interface AcceleratorConfig {
  type?: string;
  count?: string | number;
}

export interface Trial {
  trialId: string;
  state?: string;
  hyperparameters?: Record<string, string>;
  finalMetric?: { trainingStep?: string; objectiveValue?: number };
  startTime?: string;
  endTime?: string;
}

export interface Job {
  jobId: string;
  state?: string;
  createTime?: string;
  startTime?: string;
  endTime?: string;
  errorMessage?: string;
  /** The platform's words for what a waiting job waits for (its queue, a dataset); not ml.v1's. */
  statusMessage?: string;
  labels?: Record<string, string>;
  trainingInput?: {
    scaleTier?: string;
    masterType?: string;
    masterConfig?: { acceleratorConfig?: AcceleratorConfig; imageUri?: string };
    workerCount?: string | number;
    workerConfig?: { acceleratorConfig?: AcceleratorConfig };
    pythonModule?: string;
    args?: string[];
    hyperparameters?: {
      goal?: string;
      hyperparameterMetricTag?: string;
      maxTrials?: number | string;
      maxParallelTrials?: number | string;
      params?: unknown[];
    };
    [key: string]: unknown;
  };
  trainingOutput?: {
    trials?: Trial[];
    completedTrialCount?: string | number;
    isHyperparameterTuningJob?: boolean;
    /** The platform's: the trainer's last progress report (docs/jobs.md "Progress"); not ml.v1's. */
    progress?: Progress;
    [key: string]: unknown;
  };
  [key: string]: unknown;
}

/** A trainer's progress report, in Kubeflow Trainer v2's trainerStatus fields. */
export interface Progress {
  progressPercentage?: number;
  estimatedRemainingSeconds?: number;
  metrics?: { name: string; value: string }[];
  updateTime?: string;
}

/**
 * A job's last progress report in words: "42% · about 1m 3s left · loss 0.0123, rmse 0.2" (the
 * time left only while the job has not ended); "" for a job without one.
 */
export function progressText(job: Job, trans: Translate = english): string {
  const p = job.trainingOutput?.progress;
  if (!p) {
    return '';
  }
  const parts: string[] = [];
  if (typeof p.progressPercentage === 'number') {
    parts.push(trans.__('%1%', String(p.progressPercentage)));
  }
  const ended = ['SUCCEEDED', 'FAILED', 'CANCELLED'].includes(job.state ?? '');
  if (typeof p.estimatedRemainingSeconds === 'number' && !ended) {
    parts.push(trans.__('about %1 left', formatDuration(p.estimatedRemainingSeconds, trans)));
  }
  const metrics = (p.metrics ?? []).map(m => `${m.name} ${m.value}`).join(', ');
  if (metrics) {
    parts.push(metrics);
  }
  return parts.join(' · ');
}

/** The job together with the project it lives in (the panel lists several projects at once). */
export interface ProjectJob {
  project: string;
  job: Job;
}

/**
 * A number as the widgets show it (their plot.js `formatNumber`): five significant digits, in
 * exponent form when very large or very small; "" for none.
 */
export function formatNumber(v: number | null | undefined): string {
  if (v === null || v === undefined || !isFinite(v)) {
    return '';
  }
  const a = Math.abs(v);
  return a !== 0 && (a >= 1e5 || a < 1e-3) ? v.toExponential(3) : String(Number(v.toPrecision(5)));
}

/** A trial's hyperparameter value (the server's string): a number formatted as `formatNumber`, else as it is. */
export function formatParam(value: string | undefined): string {
  if (value === undefined) {
    return '';
  }
  const n = Number(value);
  return value.trim() !== '' && isFinite(n) ? formatNumber(n) : value;
}

export function isSweep(job: Job): boolean {
  return (
    !!job.trainingInput?.hyperparameters ||
    !!job.trainingOutput?.isHyperparameterTuningJob
  );
}

export function isActive(job: Job): boolean {
  return ACTIVE_STATES.has(job.state ?? '');
}

/** "NVIDIA_A100_1G_5GB × 2", "CPU only" when the job asks for no accelerator. */
export function accelerator(job: Job, trans: Translate = english): string {
  const cfg = job.trainingInput?.masterConfig?.acceleratorConfig;
  if (!cfg || !cfg.type || String(cfg.type).endsWith('UNSPECIFIED')) {
    return trans.__('CPU only');
  }
  const count = Number(cfg.count ?? 1);
  return count > 1 ? `${cfg.type} × ${count}` : String(cfg.type);
}

/** An RFC 3339 time as the user's local "YYYY-MM-DD HH:MM:SS"; "" for none or garbage. */
export function formatTime(rfc3339: string | undefined): string {
  if (!rfc3339) {
    return '';
  }
  const t = new Date(rfc3339);
  if (isNaN(t.getTime())) {
    return '';
  }
  const p = (n: number) => String(n).padStart(2, '0');
  return (
    `${t.getFullYear()}-${p(t.getMonth() + 1)}-${p(t.getDate())} ` +
    `${p(t.getHours())}:${p(t.getMinutes())}:${p(t.getSeconds())}`
  );
}

/** A span of seconds as "45s", "3m 05s", "2h 03m", "1d 4h". */
export function formatDuration(seconds: number, trans: Translate = english): string {
  if (!isFinite(seconds) || seconds < 0) {
    return '';
  }
  const s = Math.floor(seconds);
  const p = (n: number) => String(n).padStart(2, '0');
  if (s < 60) {
    return trans.__('%1s', s);
  }
  if (s < 3600) {
    return trans.__('%1m %2s', Math.floor(s / 60), p(s % 60));
  }
  if (s < 86400) {
    return trans.__('%1h %2m', Math.floor(s / 3600), p(Math.floor((s % 3600) / 60)));
  }
  return trans.__('%1d %2h', Math.floor(s / 86400), Math.floor((s % 86400) / 3600));
}

/** How long the job ran (until `now` while it runs); "" before it started. */
export function runTime(job: Job, now: number = Date.now(), trans: Translate = english): string {
  if (!job.startTime) {
    return '';
  }
  const start = Date.parse(job.startTime);
  const end = job.endTime ? Date.parse(job.endTime) : now;
  return formatDuration((end - start) / 1000, trans);
}

/** The state in plain words, for the detail view and the badge's tooltip. */
export function explainState(job: Job, trans: Translate = english): string {
  switch (job.state) {
    case 'QUEUED':
      return job.statusMessage
        ? trans.__('Waiting for its turn: %1', job.statusMessage)
        : trans.__('Waiting for its turn: the job is accepted and waits for capacity in its project.');
    case 'PREPARING':
      return job.statusMessage
        ? trans.__('Starting: %1', job.statusMessage)
        : trans.__('Starting: its pods are being scheduled and its code and data fetched.');
    case 'RUNNING':
      return trans.__('Running: the training code is executing.');
    case 'SUCCEEDED':
      return trans.__('Finished: the training code ended without error.');
    case 'FAILED':
      return job.errorMessage
        ? trans.__('Failed: %1', job.errorMessage)
        : trans.__('Failed: the training code or its environment ended with an error.');
    case 'CANCELLING':
      return trans.__('Cancelling: its processes are being stopped.');
    case 'CANCELLED':
      return trans.__('Cancelled: it was stopped before it finished.');
    default:
      return trans.__('State not known yet.');
  }
}

/** The badge's CSS modifier: one of running, waiting, ok, failed, stopped. */
export function badgeKind(state: string | undefined): string {
  switch (state) {
    case 'RUNNING':
      return 'running';
    case 'QUEUED':
    case 'PREPARING':
      return 'waiting';
    case 'SUCCEEDED':
      return 'ok';
    case 'FAILED':
      return 'failed';
    default:
      return 'stopped';
  }
}

/**
 * A sweep's trials, best first: the finished ones with a metric by the goal (MAXIMIZE: highest
 * first; MINIMIZE, the default: lowest first), then those without a metric in trial order.
 */
export function trialsBestFirst(job: Job): Trial[] {
  const trials = [...(job.trainingOutput?.trials ?? [])];
  const maximize = job.trainingInput?.hyperparameters?.goal === 'MAXIMIZE';
  const value = (t: Trial): number | undefined => {
    const v = t.finalMetric?.objectiveValue;
    return typeof v === 'number' && isFinite(v) ? v : undefined;
  };
  return trials.sort((a, b) => {
    const va = value(a);
    const vb = value(b);
    if (va !== undefined && vb !== undefined && va !== vb) {
      return maximize ? vb - va : va - vb;
    }
    if (va !== undefined && vb === undefined) {
      return -1;
    }
    if (va === undefined && vb !== undefined) {
      return 1;
    }
    return Number(a.trialId) - Number(b.trialId);
  });
}

/** The sweep's progress, "3 of 8 trials". */
export function trialProgress(job: Job, trans: Translate = english): string {
  const done = Number(job.trainingOutput?.completedTrialCount ?? 0);
  const max = job.trainingInput?.hyperparameters?.maxTrials;
  return max !== undefined
    ? trans._n('%2 of %1 trial', '%2 of %1 trials', Number(max), done)
    : trans._n('%1 trial', '%1 trials', done);
}

/** One point of a sweep's plot: a finished trial's objective, and the best so far. */
export interface PlotPoint {
  trial: number;
  value: number;
  best: number;
}

/**
 * The sweep's plot, in trial order: each trial with a finite objective, and the best objective
 * so far by the goal (MAXIMIZE: highest; else lowest). It grows as trials finish.
 */
export function plotPoints(job: Job): PlotPoint[] {
  const maximize = job.trainingInput?.hyperparameters?.goal === 'MAXIMIZE';
  const trials = [...(job.trainingOutput?.trials ?? [])].sort(
    (a, b) => Number(a.trialId) - Number(b.trialId)
  );
  const out: PlotPoint[] = [];
  let best: number | undefined;
  for (const t of trials) {
    const v = t.finalMetric?.objectiveValue;
    if (typeof v !== 'number' || !isFinite(v)) {
      continue;
    }
    best = best === undefined ? v : maximize ? Math.max(best, v) : Math.min(best, v);
    out.push({ trial: Number(t.trialId), value: v, best });
  }
  return out;
}

/**
 * Trials sorted by a column: 'trial', 'state', 'metric' or a hyperparameter's name; numbers as
 * numbers, empty values last either way. `column` '' is best first (`trialsBestFirst`).
 */
export function sortTrials(job: Job, column: string, descending: boolean): Trial[] {
  if (!column) {
    return trialsBestFirst(job);
  }
  const cell = (t: Trial): string | number | undefined => {
    const raw =
      column === 'trial'
        ? t.trialId
        : column === 'state'
          ? t.state
          : column === 'metric'
            ? t.finalMetric?.objectiveValue
            : t.hyperparameters?.[column];
    if (raw === undefined || raw === null || raw === '') {
      return undefined;
    }
    const n = Number(raw);
    return typeof raw === 'number' || (String(raw).trim() !== '' && !isNaN(n)) ? n : String(raw);
  };
  return [...(job.trainingOutput?.trials ?? [])].sort((a, b) => {
    const x = cell(a);
    const y = cell(b);
    if (x === undefined || y === undefined) {
      return x === y ? Number(a.trialId) - Number(b.trialId) : x === undefined ? 1 : -1;
    }
    const c =
      typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y));
    return (descending ? -c : c) || Number(a.trialId) - Number(b.trialId);
  });
}
