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

  /** Feed a chunk; returns the events it completed. Linear in the text fed, however it is split. */
  push(chunk: string): SSEEvent[] {
    this.buffer += chunk;
    const out: SSEEvent[] = [];
    const eol = /\r\n|\r|\n/g;
    let pos = 0;
    let m: RegExpExecArray | null;
    while ((m = eol.exec(this.buffer)) !== null) {
      if (m[0] === '\r' && m.index === this.buffer.length - 1) {
        break; // a lone CR at the end: maybe the first half of a CRLF
      }
      const line = this.buffer.slice(pos, m.index);
      pos = m.index + m[0].length;
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
    this.buffer = this.buffer.slice(pos);
    return out;
  }

  /** The last event id seen (to resume with `Last-Event-ID`). */
  get lastId(): string | undefined {
    return this.id;
  }
}
