/**
 * A Server-Sent Events parser (the subset the server sends: `id:`, `event:`, `data:`, comments),
 * fed text chunks as they arrive; pure, so the log stream's framing is unit tested.
 */

export interface SSEEvent {
  id?: string;
  event: string;
  data: string;
}

export class SSEParser {
  private buffer = '';
  private id: string | undefined;
  private event = '';
  private data: string[] = [];

  /** Feed a chunk; returns the events it completed. */
  push(chunk: string): SSEEvent[] {
    this.buffer += chunk;
    const out: SSEEvent[] = [];
    let nl: number;
    while ((nl = this.buffer.search(/\r\n|\r|\n/)) >= 0) {
      const line = this.buffer.slice(0, nl);
      const width = this.buffer.startsWith('\r\n', nl) ? 2 : 1;
      this.buffer = this.buffer.slice(nl + width);
      if (line === '') {
        if (this.data.length) {
          out.push({ id: this.id, event: this.event || 'message', data: this.data.join('\n') });
        }
        this.event = '';
        this.data = [];
        continue;
      }
      if (line.startsWith(':')) {
        continue; // a comment: keepalive
      }
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) {
        value = value.slice(1);
      }
      if (field === 'data') {
        this.data.push(value);
      } else if (field === 'event') {
        this.event = value;
      } else if (field === 'id') {
        this.id = value;
      }
    }
    return out;
  }

  /** The last event id seen (to resume with `Last-Event-ID`). */
  get lastId(): string | undefined {
    return this.id;
  }
}
