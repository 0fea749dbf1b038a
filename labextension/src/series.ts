/**
 * A sweep's trials' own metric series (the server's `GET …/jobs/{id}/trials/{trial}/metrics`:
 * `{"metrics": [{"trainingStep", "objectiveValue", "time"}]}`, the whole series each time), for the
 * detail view's per-trial plot. Pure (no DOM, no requests): the panel asks which trials are worth
 * reading now (`due`), hands each answer to `set`, and draws `lines`. Unit tested in
 * test/series.test.ts.
 *
 * A trial is read while it runs, and once more after it ended (its last reports), then never
 * again; a trial that has not started has no series yet. Each line keeps at most `maxPoints`
 * points (evenly thinned, the first and last kept), so a long run costs a bounded drawing.
 */

import { Job, Trial, trialsBestFirst } from './format';

/** One report of a trial's metric. */
export interface MetricPoint {
  step: number;
  value: number;
}

/** What the plot draws for one trial: its series and whether it is the sweep's best trial. */
export interface SeriesLine {
  trialId: string;
  points: MetricPoint[];
  best: boolean;
}

/** The trial states whose series may still grow. */
const GROWING = new Set(['RUNNING', 'CANCELLING']);
/** The trial states before any report. */
const NOT_STARTED = new Set(['', 'STATE_UNSPECIFIED', 'QUEUED', 'PREPARING']);

/** The server's answer as points, in step order; reports without a finite number are left out. */
export function parseSeries(metrics: unknown): MetricPoint[] {
  const out: MetricPoint[] = [];
  for (const m of Array.isArray(metrics) ? metrics : []) {
    const step = Number((m as any)?.trainingStep);
    const value = (m as any)?.objectiveValue;
    if (typeof value === 'number' && isFinite(value) && isFinite(step)) {
      out.push({ step, value });
    }
  }
  return out.sort((a, b) => a.step - b.step);
}

/** At most `max` points of `points`: evenly spaced ones, the first and the last always kept. */
export function thin(points: MetricPoint[], max: number): MetricPoint[] {
  if (points.length <= max || max < 2) {
    return points;
  }
  const out: MetricPoint[] = [];
  const every = (points.length - 1) / (max - 1);
  for (let i = 0; i < max; i++) {
    out.push(points[Math.round(i * every)]);
  }
  return out;
}

export class TrialSeriesStore {
  private series = new Map<string, MetricPoint[]>();
  private final = new Set<string>();

  constructor(readonly maxPoints = 200) {}

  /** Forget every trial (another job is shown). */
  clear(): void {
    this.series.clear();
    this.final.clear();
  }

  /** The trials of `job` worth reading now: running ones, and ended ones not yet read since they ended. */
  due(job: Job): string[] {
    return (job.trainingOutput?.trials ?? [])
      .filter((t: Trial) => {
        const state = t.state ?? '';
        if (NOT_STARTED.has(state)) {
          return false;
        }
        return GROWING.has(state) || !this.final.has(t.trialId);
      })
      .map(t => t.trialId)
      .sort((a, b) => Number(a) - Number(b));
  }

  /**
   * The server's series of `trialId`, read while the trial was in `state`. Returns whether the
   * line changed (the plot is drawn again only then).
   */
  set(trialId: string, state: string | undefined, metrics: unknown): boolean {
    if (!GROWING.has(state ?? '') && !NOT_STARTED.has(state ?? '')) {
      this.final.add(trialId);
    }
    const points = thin(parseSeries(metrics), this.maxPoints);
    const before = this.series.get(trialId);
    if (before && JSON.stringify(before) === JSON.stringify(points)) {
      return false;
    }
    this.series.set(trialId, points);
    return true;
  }

  get(trialId: string): MetricPoint[] {
    return this.series.get(trialId) ?? [];
  }

  /**
   * The lines to draw, in trial order, each trial with at least one point; `best` marks the
   * sweep's best trial by its final objective and goal (`trialsBestFirst`), or, before any trial
   * finished, the trial whose latest report is best so far.
   */
  lines(job: Job): SeriesLine[] {
    const best = this.bestTrial(job);
    return [...this.series.entries()]
      .filter(([, points]) => points.length > 0)
      .sort(([a], [b]) => Number(a) - Number(b))
      .map(([trialId, points]) => ({ trialId, points, best: trialId === best }));
  }

  bestTrial(job: Job): string | undefined {
    const first = trialsBestFirst(job)[0];
    if (first && typeof first.finalMetric?.objectiveValue === 'number') {
      return first.trialId;
    }
    const maximize = job.trainingInput?.hyperparameters?.goal === 'MAXIMIZE';
    let best: { trialId: string; value: number } | undefined;
    for (const [trialId, points] of this.series) {
      const last = points[points.length - 1];
      if (last && (!best || (maximize ? last.value > best.value : last.value < best.value))) {
        best = { trialId, value: last.value };
      }
    }
    return best?.trialId;
  }
}
