import { describe, expect, it } from 'vitest';

import {
  Job,
  accelerator,
  badgeKind,
  explainState,
  formatDuration,
  formatTime,
  isActive,
  isSweep,
  plotPoints,
  progressText,
  runTime,
  sortTrials,
  trialProgress,
  trialsBestFirst
} from '../src/format';

const job = (extra: Partial<Job> = {}): Job => ({ jobId: 'j1', state: 'RUNNING', ...extra });

describe('accelerator', () => {
  it.each([
    [{}, 'CPU only'],
    [{ masterConfig: { acceleratorConfig: { type: 'ACCELERATOR_TYPE_UNSPECIFIED' } } }, 'CPU only'],
    [{ masterConfig: { acceleratorConfig: { type: 'NVIDIA_A100_1G_5GB', count: '1' } } }, 'NVIDIA_A100_1G_5GB'],
    [{ masterConfig: { acceleratorConfig: { type: 'NVIDIA_TESLA_T4', count: 2 } } }, 'NVIDIA_TESLA_T4 × 2']
  ])('%j → %s', (input, shown) => {
    expect(accelerator(job({ trainingInput: input }))).toBe(shown);
  });
});

describe('times', () => {
  it('formats an RFC 3339 time in local time, nothing for none or garbage', () => {
    const t = '2026-03-04T05:06:07Z';
    const d = new Date(t);
    expect(formatTime(t)).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:07$/);
    expect(formatTime(t).slice(0, 4)).toBe(String(d.getFullYear()));
    expect(formatTime(undefined)).toBe('');
    expect(formatTime('yesterday')).toBe('');
  });

  it.each([
    [0, '0s'],
    [59.9, '59s'],
    [65, '1m 05s'],
    [3600 * 2 + 180, '2h 03m'],
    [86400 + 4 * 3600, '1d 4h'],
    [-1, ''],
    [NaN, '']
  ])('duration %s → %s', (s, shown) => {
    expect(formatDuration(s)).toBe(shown);
  });

  it('runs until the end, or until now while running; nothing before the start', () => {
    const start = '2026-01-01T00:00:00Z';
    expect(runTime(job({ startTime: start, endTime: '2026-01-01T00:01:30Z' }))).toBe('1m 30s');
    expect(runTime(job({ startTime: start }), Date.parse(start) + 10_000)).toBe('10s');
    expect(runTime(job())).toBe('');
  });
});

describe('states', () => {
  it.each([
    ['RUNNING', 'running', true],
    ['QUEUED', 'waiting', true],
    ['PREPARING', 'waiting', true],
    ['CANCELLING', 'stopped', true],
    ['SUCCEEDED', 'ok', false],
    ['FAILED', 'failed', false],
    ['CANCELLED', 'stopped', false]
  ])('%s: badge %s, active %s', (state, kind, active) => {
    expect(badgeKind(state)).toBe(kind);
    expect(isActive(job({ state }))).toBe(active);
    expect(explainState(job({ state }))).not.toBe('State not known yet.');
  });

  it('explains a failure with the server message', () => {
    expect(explainState(job({ state: 'FAILED', errorMessage: 'exit code 3' }))).toBe('Failed: exit code 3');
    expect(explainState(job({ state: undefined }))).toBe('State not known yet.');
  });

  it('says what a waiting job waits for, in the server\'s words', () => {
    const words = "queued: first in line in the project 'vision' for the job's accelerators; " +
      "the project's quota of a100 is in use (1 more needed)";
    expect(explainState(job({ state: 'QUEUED', statusMessage: words }))).toBe(`Waiting for its turn: ${words}`);
    expect(explainState(job({ state: 'PREPARING', statusMessage: "waiting for the dataset 'x'" }))).toBe(
      "Starting: waiting for the dataset 'x'");
  });
});

describe('sweeps', () => {
  const trials = [
    { trialId: '1', finalMetric: { objectiveValue: 0.5 } },
    { trialId: '2' },
    { trialId: '3', finalMetric: { objectiveValue: 0.9 } },
    { trialId: '4', finalMetric: { objectiveValue: 0.1 } }
  ];

  it('orders trials best first by the goal, those without a metric last', () => {
    const max = job({ trainingInput: { hyperparameters: { goal: 'MAXIMIZE', maxTrials: 4 } }, trainingOutput: { trials } });
    const min = job({ trainingInput: { hyperparameters: { goal: 'MINIMIZE' } }, trainingOutput: { trials } });
    expect(trialsBestFirst(max).map(t => t.trialId)).toEqual(['3', '1', '4', '2']);
    expect(trialsBestFirst(min).map(t => t.trialId)).toEqual(['4', '1', '3', '2']);
    expect(isSweep(max)).toBe(true);
    expect(isSweep(job())).toBe(false);
  });

  it('says the progress', () => {
    const s = job({ trainingInput: { hyperparameters: { maxTrials: 8 } }, trainingOutput: { completedTrialCount: '3' } });
    expect(trialProgress(s)).toBe('3 of 8 trials');
  });
});

describe('plot and sorting', () => {
  const sweep = (goal: string): Job => ({
    jobId: 's',
    trainingInput: { hyperparameters: { goal } },
    trainingOutput: {
      trials: [
        { trialId: '3', state: 'SUCCEEDED', finalMetric: { objectiveValue: 0.2 }, hyperparameters: { lr: '0.1' } },
        { trialId: '1', state: 'SUCCEEDED', finalMetric: { objectiveValue: 0.5 }, hyperparameters: { lr: '0.01' } },
        { trialId: '2', state: 'RUNNING', hyperparameters: { lr: '1' } },
        { trialId: '4', state: 'FAILED', finalMetric: { objectiveValue: 0.9 }, hyperparameters: { lr: '0.001' } }
      ]
    }
  });

  it('plots finished trials in order with the best so far by the goal', () => {
    expect(plotPoints(sweep('MINIMIZE'))).toEqual([
      { trial: 1, value: 0.5, best: 0.5 },
      { trial: 3, value: 0.2, best: 0.2 },
      { trial: 4, value: 0.9, best: 0.2 }
    ]);
    expect(plotPoints(sweep('MAXIMIZE')).map(p => p.best)).toEqual([0.5, 0.5, 0.9]);
  });

  it('sorts by a column, numbers as numbers, empty last', () => {
    const ids = (col: string, desc: boolean) => sortTrials(sweep('MINIMIZE'), col, desc).map(t => t.trialId);
    expect(ids('', false)).toEqual(['3', '1', '4', '2']);
    expect(ids('lr', false)).toEqual(['4', '1', '3', '2']);
    expect(ids('lr', true)).toEqual(['2', '3', '1', '4']);
    expect(ids('metric', true)).toEqual(['4', '1', '3', '2']);
    expect(ids('state', false)).toEqual(['4', '2', '1', '3']);
    expect(ids('trial', true)).toEqual(['4', '3', '2', '1']);
  });
});

describe('numbers as the widgets show them', () => {
  it('formats objectives and hyperparameter values with five significant digits', async () => {
    const { formatNumber, formatParam } = await import('../src/format');
    expect(formatNumber(0.912345678)).toBe('0.91235');
    expect(formatNumber(123456)).toBe('1.235e+5');
    expect(formatNumber(0.0001234)).toBe('1.234e-4');
    expect(formatNumber(undefined)).toBe('');
    expect(formatParam('0.012345678901234567')).toBe('0.012346');
    expect(formatParam('64')).toBe('64');
    expect(formatParam('adam')).toBe('adam');
    expect(formatParam(undefined)).toBe('');
  });
});

describe("a running job's time goes on in its detail view", () => {
  it('tickRunTime brings "Ran for" up to now', async () => {
    const { tickRunTime } = await import('../src/facts');
    const { english } = await import('../src/format');
    const dd = { textContent: '' };
    const facts = { querySelector: (sel: string) => (sel === '.mlp-ran-for' ? dd : null) } as unknown as ParentNode;
    const running = { jobId: 'j', state: 'RUNNING', startTime: '2026-01-01T00:00:00Z' } as Job;
    const trans = english as unknown as Parameters<typeof tickRunTime>[2];
    tickRunTime(facts, running, trans, Date.parse('2026-01-01T00:00:10Z'));
    expect(dd.textContent).toBe('10s');
    tickRunTime(facts, running, trans, Date.parse('2026-01-01T00:01:30Z'));
    expect(dd.textContent).toBe('1m 30s');
  });
});

describe("the panel's plots' axes", () => {
  it('label round values within the data, as the widgets do', async () => {
    const { ticks } = await import('../src/plots');
    expect(ticks(0, 1)).toEqual([0, 0.5, 1]);
    expect(ticks(1, 8)).toEqual([2, 4, 6, 8]);
    expect(ticks(0.8123, 0.9377)).toEqual([0.85, 0.9]);
    expect(ticks(3, 3)).toEqual([3]);
    expect(ticks(NaN, 1)).toEqual([]);
  });
});

describe('progressText', () => {
  const progress = { progressPercentage: 42, estimatedRemainingSeconds: 63, metrics: [{ name: 'loss', value: '0.0123' }, { name: 'rmse', value: '0.2' }] };
  it('says the percentage, the time left while the job runs, and the metrics', () => {
    expect(progressText(job({ trainingOutput: { progress } }))).toBe('42% · about 1m 03s left · loss 0.0123, rmse 0.2');
    expect(progressText(job({ state: 'SUCCEEDED', trainingOutput: { progress } }))).toBe('42% · loss 0.0123, rmse 0.2');
    expect(progressText(job({ trainingOutput: { progress: { metrics: [{ name: 'loss', value: '1' }] } } }))).toBe('loss 1');
    expect(progressText(job())).toBe('');
  });
});
