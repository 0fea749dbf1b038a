/**
 * The server extension's REST + SSE API (`ml/v1/…`, server_ext/rest/handlers.py), through
 * JupyterLab's ServerConnection (its token, XSRF cookie and base URL). Nothing else is called.
 */

import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { Job } from './format';
import { SSEEvent, SSEParser } from './sse';

/** Google's error JSON, with the field the server named (e.g. `trainingInput.args`). */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly fields: { field: string; description: string }[] = []
  ) {
    super(message);
  }
}

function settings(): ServerConnection.ISettings {
  return ServerConnection.makeSettings();
}

export function apiUrl(...parts: string[]): string {
  return URLExt.join(settings().baseUrl, 'ml/v1', ...parts.map(encodeURIComponent));
}

function jobsPath(project: string): string {
  return URLExt.join(settings().baseUrl, 'ml/v1/projects', encodeURIComponent(project), 'jobs');
}

async function request(url: string, init: RequestInit = {}): Promise<any> {
  const s = settings();
  const response = await ServerConnection.makeRequest(url, init, s);
  const text = await response.text();
  let body: any = {};
  try {
    body = text ? JSON.parse(text) : {};
  } catch {
    body = { error: { message: text } };
  }
  if (!response.ok) {
    const err = body.error ?? {};
    const fields: { field: string; description: string }[] = [];
    for (const detail of err.details ?? []) {
      for (const v of detail.fieldViolations ?? []) {
        fields.push({ field: v.field, description: v.description });
      }
    }
    throw new ApiError(err.message ?? response.statusText, response.status, fields);
  }
  return body;
}

/** Every job of `project` (all pages). */
export async function listJobs(project: string): Promise<Job[]> {
  const jobs: Job[] = [];
  let token = '';
  for (let page = 0; page < 100; page++) {
    const q = token ? `?pageSize=100&pageToken=${encodeURIComponent(token)}` : '?pageSize=100';
    const body = await request(jobsPath(project) + q);
    jobs.push(...(body.jobs ?? []));
    token = body.nextPageToken ?? '';
    if (!token) {
      break;
    }
  }
  return jobs;
}

export async function getJob(project: string, jobId: string): Promise<Job> {
  return request(URLExt.join(jobsPath(project), jobId));
}

/** A sweep trial's metric series (`GET …/jobs/{id}/trials/{trial}/metrics`): the server's `metrics` list. */
export async function trialMetrics(project: string, jobId: string, trialId: string): Promise<unknown[]> {
  const body = await request(URLExt.join(jobsPath(project), jobId, 'trials', encodeURIComponent(trialId), 'metrics'));
  return body.metrics ?? [];
}

export async function cancelJob(project: string, jobId: string): Promise<void> {
  await request(URLExt.join(jobsPath(project), `${jobId}:cancel`), { method: 'POST', body: '{}' });
}

export async function createJob(project: string, job: unknown): Promise<Job> {
  return request(jobsPath(project), { method: 'POST', body: JSON.stringify(job) });
}

/** The URL of a task's whole log (the download link: SSE without follow, read to its end). */
export function logUrl(project: string, jobId: string, task: string, follow: boolean): string {
  const q = `?task=${encodeURIComponent(task)}&follow=${follow ? 'true' : 'false'}`;
  return URLExt.join(jobsPath(project), jobId, 'logs') + q;
}

export interface LogEvent {
  seq: number;
  task: string;
  text: string;
  time?: string | null;
  stream?: string | null;
}

/** The message of a Google error body (`{"error": {"message"}}`); undefined when `text` is not one. */
function errorMessage(text: string): string | undefined {
  try {
    return JSON.parse(text).error.message;
  } catch {
    return undefined;
  }
}

/** The events `parser` completes from each chunk of an SSE `body`, one array per chunk as it arrives. */
async function* sseChunks(body: ReadableStream<Uint8Array>, parser: SSEParser): AsyncGenerator<SSEEvent[]> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) {
      return;
    }
    yield parser.push(value);
  }
}

/**
 * Follow a task's log: `onLines` gets each batch of lines as it arrives, `onEnd` the job's state
 * at the end. Resumes after a dropped connection from the last line seen. Returns a stop function.
 */
export function followLog(
  project: string,
  jobId: string,
  task: string,
  onLines: (lines: LogEvent[]) => void,
  onEnd: (state: string | undefined) => void,
  onError: (message: string) => void
): () => void {
  const abort = new AbortController();
  let last: string | undefined;
  let ended = false;
  const run = async () => {
    for (let attempt = 0; attempt < 20 && !abort.signal.aborted && !ended; attempt++) {
      const parser = new SSEParser();
      try {
        const headers: Record<string, string> = { Accept: 'text/event-stream' };
        if (last !== undefined) {
          headers['Last-Event-ID'] = last;
        }
        const response = await ServerConnection.makeRequest(
          logUrl(project, jobId, task, true),
          { headers, signal: abort.signal },
          settings()
        );
        if (!response.ok || !response.body) {
          const text = await response.text();
          onError(errorMessage(text) ?? (text || response.statusText));
          return;
        }
        for await (const events of sseChunks(response.body, parser)) {
          const lines: LogEvent[] = [];
          for (const ev of events) {
            if (ev.event === 'end') {
              ended = true;
              onLines(lines.splice(0));
              onEnd(JSON.parse(ev.data).state);
            } else {
              lines.push(JSON.parse(ev.data));
              if (lines.length >= 5000) {
                onLines(lines.splice(0)); // bounded: the viewer keeps only its last lines anyway
              }
            }
          }
          last = parser.lastId ?? last;
          if (lines.length) {
            onLines(lines);
          }
        }
      } catch (e) {
        if (abort.signal.aborted) {
          return;
        }
      }
      if (!ended && !abort.signal.aborted) {
        await new Promise(r => setTimeout(r, Math.min(1000 * (attempt + 1), 5000)));
      }
    }
  };
  void run();
  return () => abort.abort();
}

/** The projects the user may use (the server's `GET ml/v1/projects`). */
export async function projectsList(): Promise<string[]> {
  const body = await request(URLExt.join(settings().baseUrl, 'ml/v1/projects'));
  return (body.projects ?? []).map((p: { name: string }) => p.name);
}

export interface SubmitFormChoices {
  scaleTiers: string[];
  maxAccelerators: number;
  accelerators: { value: string; label: string; most: number }[];
  notes: string[];
  credentials: string[];
  datasets: string[];
  projects: string[];
  fields: Record<string, string>;
  /** What the sweep box holds once ticked while empty (the widget's `SWEEP_TEMPLATE`). */
  sweepTemplate: string;
}

/** The notebook widget's submit form for `project` (`GET …/submitForm`). */
export async function submitFormChoices(project: string): Promise<SubmitFormChoices> {
  return request(URLExt.join(settings().baseUrl, 'ml/v1/projects', encodeURIComponent(project), 'submitForm'));
}

/** Submit the form's values as the widget does (`POST …/submitForm`): the new job. */
export async function submitForm(project: string, values: unknown): Promise<Job> {
  return request(URLExt.join(settings().baseUrl, 'ml/v1/projects', encodeURIComponent(project), 'submitForm'), {
    method: 'POST',
    body: JSON.stringify(values)
  });
}

/**
 * Watch `project`'s job listing (`GET …/jobs:watch`, SSE): `onJobs` gets the whole listing at once
 * and whenever it changes. Returns a stop function; `onFail` is told when the stream cannot be had
 * (an older server answers 404) or ended with an error, so the caller can fall back to reading.
 */
export function watchJobs(
  project: string,
  onJobs: (jobs: Job[]) => void,
  onFail: (message: string, status: number) => void
): () => void {
  const abort = new AbortController();
  const run = async () => {
    const parser = new SSEParser();
    try {
      const url = URLExt.join(settings().baseUrl, 'ml/v1/projects', encodeURIComponent(project), 'jobs:watch');
      const response = await ServerConnection.makeRequest(
        url,
        { headers: { Accept: 'text/event-stream' }, signal: abort.signal },
        settings()
      );
      if (!response.ok || !response.body) {
        onFail(errorMessage(await response.text()) ?? response.statusText, response.status);
        return;
      }
      for await (const events of sseChunks(response.body, parser)) {
        for (const ev of events) {
          if (ev.event === 'jobs') {
            onJobs(JSON.parse(ev.data).jobs ?? []);
          } else if (ev.event === 'error') {
            onFail(JSON.parse(ev.data).message, 0);
            return;
          }
        }
      }
      if (!abort.signal.aborted) {
        onFail('the stream ended', 0); // not translated: status 0 is never shown (the list is read again)
      }
    } catch (e) {
      if (!abort.signal.aborted) {
        onFail(String((e as Error).message ?? e), 0);
      }
    }
  };
  void run();
  return () => abort.abort();
}
