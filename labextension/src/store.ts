/**
 * The panel's model: the user's jobs in each project, the filter, the selection. Pure (no DOM,
 * no requests): the API layer feeds it whole project listings (`setJobs`), it says what changed
 * through `onChange`. Unit tested in test/store.test.ts.
 */

import { Job, ProjectJob, isActive } from './format';

export interface Filter {
  /** '' for every state, else one state (e.g. RUNNING). */
  state: string;
  /** Case-insensitive text matched against the job id, project, labels and module. */
  text: string;
}

export type Listener = () => void;

export class JobsStore {
  private jobs = new Map<string, Map<string, Job>>();
  private listeners = new Set<Listener>();
  private _filter: Filter = { state: '', text: '' };
  private _selected: { project: string; jobId: string } | null = null;
  private _errors = new Map<string, string>();

  onChange(fn: Listener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private emit(): void {
    for (const fn of this.listeners) {
      fn();
    }
  }

  get projects(): string[] {
    return [...this.jobs.keys()].sort();
  }

  /**
   * Replace the jobs of `project` with a full listing. Returns whether anything changed (an
   * unchanged listing emits nothing, so an idle panel does not re-render).
   */
  setJobs(project: string, jobs: Job[]): boolean {
    const before = this.jobs.get(project);
    const after = new Map(jobs.map(j => [j.jobId, j]));
    let changed = !before || before.size !== after.size || this._errors.has(project);
    if (!changed) {
      for (const [id, job] of after) {
        const old = before!.get(id);
        if (!old || JSON.stringify(old) !== JSON.stringify(job)) {
          changed = true;
          break;
        }
      }
    }
    this._errors.delete(project);
    if (changed) {
      this.jobs.set(project, after);
      this.emit();
    }
    return changed;
  }

  /** Update one job (a get after cancel, the end of a log stream). */
  putJob(project: string, job: Job): void {
    const jobs = this.jobs.get(project) ?? new Map<string, Job>();
    jobs.set(job.jobId, job);
    this.jobs.set(project, jobs);
    this.emit();
  }

  setError(project: string, message: string): void {
    if (this._errors.get(project) !== message) {
      this._errors.set(project, message);
      this.emit();
    }
  }

  error(project: string): string | undefined {
    return this._errors.get(project);
  }

  removeProject(project: string): void {
    if (this.jobs.delete(project)) {
      this.emit();
    }
  }

  get filter(): Filter {
    return this._filter;
  }

  setFilter(filter: Partial<Filter>): void {
    this._filter = { ...this._filter, ...filter };
    this.emit();
  }

  get selected(): { project: string; jobId: string } | null {
    return this._selected;
  }

  select(project: string | null, jobId?: string): void {
    this._selected = project && jobId ? { project, jobId } : null;
    this.emit();
  }

  job(project: string, jobId: string): Job | undefined {
    return this.jobs.get(project)?.get(jobId);
  }

  /** Every job of `projects` (all when omitted), newest first. */
  all(projects?: string[]): ProjectJob[] {
    const out: ProjectJob[] = [];
    for (const project of projects ?? this.projects) {
      for (const job of this.jobs.get(project)?.values() ?? []) {
        out.push({ project, job });
      }
    }
    return out.sort(
      (a, b) =>
        (b.job.createTime ?? '').localeCompare(a.job.createTime ?? '') ||
        a.job.jobId.localeCompare(b.job.jobId)
    );
  }

  /** The jobs the filter lets through, newest first. */
  visible(projects?: string[]): ProjectJob[] {
    return this.all(projects).filter(pj => matches(pj, this._filter));
  }

  /** How many jobs run now, across every project. */
  get running(): number {
    return this.all().filter(pj => pj.job.state === 'RUNNING').length;
  }

  /** How many jobs may still change (their project is worth listing again soon). */
  get active(): number {
    return this.all().filter(pj => isActive(pj.job)).length;
  }
}

export function matches(pj: ProjectJob, filter: Filter): boolean {
  if (filter.state && pj.job.state !== filter.state) {
    return false;
  }
  const text = filter.text.trim().toLowerCase();
  if (!text) {
    return true;
  }
  const hay = [
    pj.job.jobId,
    pj.project,
    pj.job.trainingInput?.pythonModule ?? '',
    ...Object.entries(pj.job.labels ?? {}).map(([k, v]) => `${k}=${v}`)
  ]
    .join(' ')
    .toLowerCase();
  return text.split(/\s+/).every(word => hay.includes(word));
}
