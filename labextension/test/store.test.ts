import { describe, expect, it } from 'vitest';

import { Job } from '../src/format';
import { LogBuffer } from '../src/logbuffer';
import { SSEParser } from '../src/sse';
import { JobsStore, matches } from '../src/store';

const job = (jobId: string, state = 'RUNNING', createTime = '2026-01-01T00:00:00Z', extra: Partial<Job> = {}): Job => ({
  jobId,
  state,
  createTime,
  ...extra
});

describe('JobsStore', () => {
  it('keeps each project listing, newest first across projects, and emits only on change', () => {
    const store = new JobsStore();
    let changes = 0;
    store.onChange(() => changes++);
    expect(store.setJobs('a', [job('old', 'SUCCEEDED', '2026-01-01T00:00:00Z')])).toBe(true);
    expect(store.setJobs('b', [job('new', 'RUNNING', '2026-01-02T00:00:00Z')])).toBe(true);
    expect(changes).toBe(2);
    expect(store.setJobs('a', [job('old', 'SUCCEEDED', '2026-01-01T00:00:00Z')])).toBe(false);
    expect(changes).toBe(2);
    expect(store.all().map(pj => `${pj.project}/${pj.job.jobId}`)).toEqual(['b/new', 'a/old']);
    expect(store.projects).toEqual(['a', 'b']);
    expect(store.running).toBe(1);
    expect(store.active).toBe(1);
    store.setJobs('b', [job('new', 'SUCCEEDED', '2026-01-02T00:00:00Z')]);
    expect(store.running).toBe(0);
    expect(changes).toBe(3);
  });

  it('filters by state and by every word of the text', () => {
    const store = new JobsStore();
    store.setJobs('vision', [
      job('resnet_1', 'RUNNING', '2026-01-01T00:00:00Z', { labels: { team: 'cv' } }),
      job('bert_1', 'FAILED')
    ]);
    store.setFilter({ state: 'RUNNING' });
    expect(store.visible().map(pj => pj.job.jobId)).toEqual(['resnet_1']);
    store.setFilter({ state: '', text: 'BERT' });
    expect(store.visible().map(pj => pj.job.jobId)).toEqual(['bert_1']);
    store.setFilter({ text: 'vision team=cv' });
    expect(store.visible().map(pj => pj.job.jobId)).toEqual(['resnet_1']);
    expect(matches({ project: 'p', job: job('x') }, { state: '', text: '  ' })).toBe(true);
    expect(store.visible(['other'])).toEqual([]);
  });

  it('selects a job, updates one, keeps an error per project until the next listing', () => {
    const store = new JobsStore();
    store.select('p', 'j');
    expect(store.selected).toEqual({ project: 'p', jobId: 'j' });
    store.putJob('p', job('j', 'CANCELLING'));
    expect(store.job('p', 'j')?.state).toBe('CANCELLING');
    store.setError('p', 'p: forbidden');
    expect(store.error('p')).toBe('p: forbidden');
    store.setJobs('p', [job('j', 'CANCELLED')]);
    expect(store.error('p')).toBeUndefined();
    store.select(null);
    expect(store.selected).toBeNull();
    store.removeProject('p');
    expect(store.projects).toEqual([]);
  });
});

describe('LogBuffer', () => {
  it('keeps the last lines only, counting what it dropped', () => {
    const buf = new LogBuffer(3);
    for (let i = 1; i <= 5; i++) {
      buf.push({ seq: i, text: `line ${i}` });
    }
    expect(buf.size).toBe(3);
    expect(buf.seen).toBe(5);
    expect(buf.dropped).toBe(2);
    expect(buf.slice(0, 10).map(l => l.seq)).toEqual([3, 4, 5]);
    expect(buf.at(3)).toBeUndefined();
    expect(buf.search('LINE 4')).toEqual([1]);
    expect(buf.search('')).toEqual([]);
    buf.clear();
    expect(buf.size).toBe(0);
    expect(() => new LogBuffer(0)).toThrow();
  });

  it('stays bounded for a million lines', () => {
    const buf = new LogBuffer(1000);
    for (let i = 0; i < 1_000_000; i++) {
      buf.push({ seq: i, text: 'x' });
    }
    expect(buf.size).toBe(1000);
    expect(buf.at(0)?.seq).toBe(999_000);
  });
});

describe('SSEParser', () => {
  it('parses events split anywhere, skips comments, keeps the last id', () => {
    const p = new SSEParser();
    const stream = 'id: 1\ndata: {"seq": 1}\n\n: keepalive\n\nid: 2\r\ndata: a\ndata: b\r\n\r\nevent: end\ndata: {"state":"SUCCEEDED"}\n\n';
    const events = [];
    for (let i = 0; i < stream.length; i += 7) {
      events.push(...p.push(stream.slice(i, i + 7)));
    }
    expect(events).toEqual([
      { id: '1', event: 'message', data: '{"seq": 1}' },
      { id: '2', event: 'message', data: 'a\nb' },
      { id: '2', event: 'end', data: '{"state":"SUCCEEDED"}' }
    ]);
    expect(p.lastId).toBe('2');
  });
});

describe('SSEParser at scale', () => {
  it('parses 200,000 events fed at once in linear time', () => {
    const p = new SSEParser();
    const one = 'id: 1\ndata: {"seq": 1, "text": "epoch 1/10 loss=0.35"}\n\n';
    const t0 = Date.now();
    const events = p.push(one.repeat(200_000));
    expect(events.length).toBe(200_000);
    expect(Date.now() - t0).toBeLessThan(5000);
  });

  it('keeps a CR at the end of a chunk until it knows whether LF follows', () => {
    const p = new SSEParser();
    expect(p.push('data: a\r')).toEqual([]);
    expect(p.push('\n\r\n')).toEqual([{ id: undefined, event: 'message', data: 'a' }]);
  });
});
