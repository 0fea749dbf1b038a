/**
 * A virtualized, bounded log viewer: only the lines in view are in the DOM (fixed line height),
 * the buffer keeps the last `capacity` lines, it follows the end while scrolled to the bottom,
 * and a search box jumps between matches.
 */

import { TranslationBundle } from '@jupyterlab/translation';

import { LogBuffer, LogLine } from './logbuffer';

const LINE_PX = 18;
const OVERSCAN = 20;

export class LogView {
  readonly node: HTMLElement;
  readonly buffer: LogBuffer;
  private viewport: HTMLElement;
  private spacer: HTMLElement;
  private lines: HTMLElement;
  private status: HTMLElement;
  private searchInput: HTMLInputElement;
  private hits: number[] = [];
  private hit = -1;
  private follow = true;
  private pending = false;

  constructor(capacity: number, private trans: TranslationBundle, downloadUrl: string) {
    this.buffer = new LogBuffer(capacity);
    this.node = document.createElement('div');
    this.node.className = 'mlp-log';

    const bar = document.createElement('div');
    bar.className = 'mlp-log-bar';
    this.searchInput = document.createElement('input');
    this.searchInput.type = 'search';
    this.searchInput.className = 'mlp-log-search jp-mod-styled';
    this.searchInput.placeholder = trans.__('Search the log');
    this.searchInput.setAttribute('aria-label', trans.__('Search the log'));
    this.searchInput.addEventListener('input', () => this.runSearch());
    this.searchInput.addEventListener('keydown', e => {
      if (e.key === 'Enter') {
        e.preventDefault();
        this.nextHit(e.shiftKey ? -1 : 1);
      }
    });
    const download = document.createElement('a');
    download.className = 'mlp-log-download';
    download.href = downloadUrl;
    download.setAttribute('download', '');
    download.textContent = trans.__('Download full log');
    this.status = document.createElement('span');
    this.status.className = 'mlp-log-status';
    this.status.setAttribute('aria-live', 'polite');
    bar.append(this.searchInput, download, this.status);

    this.viewport = document.createElement('div');
    this.viewport.className = 'mlp-log-viewport';
    this.viewport.tabIndex = 0;
    this.viewport.setAttribute('role', 'log');
    this.viewport.setAttribute('aria-label', trans.__('Job log'));
    this.spacer = document.createElement('div');
    this.spacer.className = 'mlp-log-spacer';
    this.lines = document.createElement('div');
    this.lines.className = 'mlp-log-lines';
    this.spacer.appendChild(this.lines);
    this.viewport.appendChild(this.spacer);
    this.viewport.addEventListener('scroll', () => {
      const atEnd =
        this.viewport.scrollTop + this.viewport.clientHeight >= this.viewport.scrollHeight - LINE_PX;
      this.follow = atEnd;
      this.render();
    });
    this.node.append(bar, this.viewport);
  }

  get following(): boolean {
    return this.follow;
  }

  append(lines: LogLine[]): void {
    for (const line of lines) {
      this.buffer.push(line);
    }
    this.schedule();
  }

  setStatus(text: string): void {
    this.status.textContent = text;
  }

  private schedule(): void {
    if (this.pending) {
      return;
    }
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.spacer.style.height = `${this.buffer.size * LINE_PX}px`;
      if (this.follow) {
        this.viewport.scrollTop = this.viewport.scrollHeight;
      }
      if (this.searchInput.value) {
        this.hits = this.buffer.search(this.searchInput.value);
      }
      this.render();
    });
  }

  render(): void {
    const height = this.viewport.clientHeight || 300;
    const first = Math.max(0, Math.floor(this.viewport.scrollTop / LINE_PX) - OVERSCAN);
    const last = Math.min(this.buffer.size, first + Math.ceil(height / LINE_PX) + 2 * OVERSCAN);
    this.lines.style.transform = `translateY(${first * LINE_PX}px)`;
    const hitSet = new Set(this.hits);
    const current = this.hits[this.hit];
    const frag = document.createDocumentFragment();
    this.buffer.slice(first, last).forEach((line, k) => {
      const div = document.createElement('div');
      const i = first + k;
      div.className = 'mlp-log-line';
      if (line.stream === 'stderr') {
        div.classList.add('mlp-mod-stderr');
      }
      if (hitSet.has(i)) {
        div.classList.add(i === current ? 'mlp-mod-current' : 'mlp-mod-hit');
      }
      div.textContent = line.text;
      frag.appendChild(div);
    });
    this.lines.replaceChildren(frag);
    const dropped = this.buffer.dropped;
    const base =
      dropped > 0
        ? this.trans.__('%1 lines (the first %2 not kept here: download the full log)', this.buffer.seen, dropped)
        : this.trans.__('%1 lines', this.buffer.seen);
    const found = this.searchInput.value
      ? ' · ' + this.trans.__('%1 matches', this.hits.length)
      : '';
    this.status.textContent = base + found;
  }

  private runSearch(): void {
    this.hits = this.buffer.search(this.searchInput.value);
    this.hit = -1;
    this.nextHit(1);
  }

  private nextHit(step: number): void {
    if (!this.hits.length) {
      this.render();
      return;
    }
    this.hit = (this.hit + step + this.hits.length) % this.hits.length;
    this.follow = false;
    this.viewport.scrollTop = Math.max(0, this.hits[this.hit] * LINE_PX - this.viewport.clientHeight / 2);
    this.render();
  }
}
