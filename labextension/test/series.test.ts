import { describe, expect, it } from 'vitest';

import { Job, Trial } from '../src/format';
import { TrialSeriesStore, parseSeries, thin } from '../src/series';

const sweep = (trials: Trial[], goal = 'MINIMIZE'): Job => ({
  jobId: 's',
  state: 'RUNNING',
  trainingInput: { hyperparameters: { goal, hyperparameterMetricTag: 'rmse' } },
  trainingOutput: { isHyperparameterTuningJob: true, trials }
});
const report = (step: number, value: number) => ({ trainingStep: String(step), objectiveValue: value, time: 'x' });

describe('parseSeries', () => {
  it('reads the server answer in step order and leaves out what is not a finite number', () => {
    expect(parseSeries([report(2, 0.5), report(1, 0.9), { trainingStep: '3', objectiveValue: 'NaN' },
      { trainingStep: 'x', objectiveValue: 1 }, null])).toEqual([
      { step: 1, value: 0.9 },
      { step: 2, value: 0.5 }
    ]);
    expect(parseSeries(undefined)).toEqual([]);
    expect(parseSeries({ metrics: [] })).toEqual([]);
  });
});

describe('thin', () => {
  it('keeps at most max points, evenly, the first and last included', () => {
    const points = Array.from({ length: 1001 }, (_, i) => ({ step: i, value: i }));
    const out = thin(points, 11);
    expect(out.map(p => p.step)).toEqual([0, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]);
    expect(thin(points.slice(0, 5), 11)).toHaveLength(5);
  });
});

describe('TrialSeriesStore', () => {
  it('reads running trials, and an ended one once more, never one not started', () => {
    const store = new TrialSeriesStore();
    let job = sweep([
      { trialId: '1', state: 'RUNNING' },
      { trialId: '2', state: 'QUEUED' }
    ]);
    expect(store.due(job)).toEqual(['1']);
    expect(store.set('1', 'RUNNING', [report(1, 0.9)])).toBe(true);
    expect(store.due(job)).toEqual(['1']); // still running: read again
    job = sweep([
      { trialId: '1', state: 'SUCCEEDED', finalMetric: { objectiveValue: 0.5 } },
      { trialId: '2', state: 'RUNNING' }
    ]);
    expect(store.due(job)).toEqual(['1', '2']); // 1 ended since it was read: once more
    expect(store.set('1', 'SUCCEEDED', [report(1, 0.9), report(2, 0.5)])).toBe(true);
    expect(store.set('2', 'RUNNING', [])).toBe(true);
    expect(store.due(job)).toEqual(['2']);
  });

  it('says whether a line changed, so an idle plot is not drawn again', () => {
    const store = new TrialSeriesStore();
    expect(store.set('1', 'RUNNING', [report(1, 0.9)])).toBe(true);
    expect(store.set('1', 'RUNNING', [report(1, 0.9)])).toBe(false);
    expect(store.set('1', 'RUNNING', [report(1, 0.9), report(2, 0.7)])).toBe(true);
    expect(store.get('1')).toEqual([{ step: 1, value: 0.9 }, { step: 2, value: 0.7 }]);
  });

  it('grows each line and marks the best trial by final objective and goal', () => {
    const store = new TrialSeriesStore();
    store.set('2', 'SUCCEEDED', [report(1, 0.8), report(2, 0.3)]);
    store.set('1', 'SUCCEEDED', [report(1, 0.9), report(2, 0.5)]);
    store.set('3', 'RUNNING', []);
    const trials = [
      { trialId: '1', state: 'SUCCEEDED', finalMetric: { objectiveValue: 0.5 } },
      { trialId: '2', state: 'SUCCEEDED', finalMetric: { objectiveValue: 0.3 } },
      { trialId: '3', state: 'RUNNING' }
    ];
    expect(store.lines(sweep(trials)).map(l => [l.trialId, l.points.length, l.best])).toEqual([
      ['1', 2, false],
      ['2', 2, true]
    ]);
    expect(store.lines(sweep(trials, 'MAXIMIZE')).find(l => l.best)?.trialId).toBe('1');
  });

  it('before any trial finished, the best is the one whose latest report is best', () => {
    const store = new TrialSeriesStore();
    store.set('1', 'RUNNING', [report(1, 0.9), report(2, 0.4)]);
    store.set('2', 'RUNNING', [report(1, 0.6)]);
    const trials = [
      { trialId: '1', state: 'RUNNING' },
      { trialId: '2', state: 'RUNNING' }
    ];
    expect(store.bestTrial(sweep(trials))).toBe('1');
    expect(store.bestTrial(sweep(trials, 'MAXIMIZE'))).toBe('2');
  });

  it('bounds each line and forgets everything on clear', () => {
    const store = new TrialSeriesStore(50);
    store.set('1', 'RUNNING', Array.from({ length: 10_000 }, (_, i) => report(i, 1 / (i + 1))));
    expect(store.get('1')).toHaveLength(50);
    expect(store.get('1')[49].step).toBe(9999);
    store.clear();
    expect(store.get('1')).toEqual([]);
    expect(store.due(sweep([{ trialId: '1', state: 'SUCCEEDED' }]))).toEqual(['1']);
  });
});
