/**
 * A bounded log: the last `capacity` lines in a ring, with the total count seen, so memory stays
 * bounded whatever the log's size (the full log is a download). Pure; unit tested.
 */

export interface LogLine {
  seq: number;
  text: string;
  stream?: string | null;
}

export class LogBuffer {
  private ring: LogLine[] = [];
  private start = 0;
  private total = 0;

  constructor(private capacity: number) {
    if (!(capacity >= 1)) {
      throw new Error('capacity must be at least 1');
    }
  }

  get size(): number {
    return this.ring.length;
  }

  /** Lines seen in all, dropped ones included. */
  get seen(): number {
    return this.total;
  }

  /** Lines dropped from the front to keep within capacity. */
  get dropped(): number {
    return this.total - this.ring.length;
  }

  push(line: LogLine): void {
    this.total++;
    if (this.ring.length < this.capacity) {
      this.ring.push(line);
    } else {
      this.ring[this.start] = line;
      this.start = (this.start + 1) % this.capacity;
    }
  }

  /** The i-th kept line, oldest first. */
  at(i: number): LogLine | undefined {
    if (i < 0 || i >= this.ring.length) {
      return undefined;
    }
    return this.ring[(this.start + i) % this.ring.length];
  }

  /** Kept lines [from, to), oldest first. */
  slice(from: number, to: number): LogLine[] {
    const out: LogLine[] = [];
    for (let i = Math.max(0, from); i < Math.min(to, this.ring.length); i++) {
      out.push(this.at(i)!);
    }
    return out;
  }

  /** Indexes of the kept lines that contain `text` (case-insensitive); [] for an empty query. */
  search(text: string): number[] {
    if (!text) {
      return [];
    }
    const needle = text.toLowerCase();
    const hits: number[] = [];
    for (let i = 0; i < this.ring.length; i++) {
      if (this.at(i)!.text.toLowerCase().includes(needle)) {
        hits.push(i);
      }
    }
    return hits;
  }

  clear(): void {
    this.ring = [];
    this.start = 0;
    this.total = 0;
  }
}
