import { connect } from 'node:net';

export interface RawAnswer {
  /** The status line's code, or 0 when the server closed (or the caller gave up) without an answer. */
  status: number;
  statusLine: string;
  head: string;
  body: string;
  /** From the first write to the end of the answer, or of the connection. */
  ms: number;
}

/**
 * Writes `chunks` on a fresh TCP connection, `gapMs` apart and byte for byte (latin1: none of a client's
 * checks of header values), and reads one answer: until its `Content-Length` is in, or the server closes.
 * What a client Node would not let us be looks like: a control character in a header, a field sent twice, a
 * request that arrives slowly. A server that never answers is an answer too (status 0 after `giveUpMs`).
 */
export function rawHttp(url: string, chunks: string[], { gapMs = 0, giveUpMs = 10_000 } = {}): Promise<RawAnswer> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const started = Date.now();
    const socket = connect(Number(port), hostname);
    let received = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      // One answer is all a test reads; the server may keep the connection for more.
      const headEnd = received.indexOf('\r\n\r\n');
      const length = /\r\ncontent-length: (\d+)/i.exec(received.subarray(0, headEnd).toString('latin1'))?.[1];
      if (headEnd >= 0 && length !== undefined && received.length >= headEnd + 4 + Number(length)) socket.end();
    });
    // The server may reset the connection right after its answer; what arrived before still counts.
    socket.on('error', () => undefined);
    const giveUp = setTimeout(() => socket.destroy(), giveUpMs);
    socket.once('close', () => {
      clearTimeout(giveUp);
      const [head, ...rest] = received.toString('utf8').split('\r\n\r\n');
      const statusLine = head.split('\r\n')[0];
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine)?.[1] ?? 0);
      resolve({ status, statusLine, head, body: rest.join('\r\n\r\n'), ms: Date.now() - started });
    });
    chunks.forEach((chunk, i) => setTimeout(() => socket.write(chunk, 'latin1'), i * gapMs));
  });
}
