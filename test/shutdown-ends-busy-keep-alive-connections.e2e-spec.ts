import { connect, Socket } from 'node:net';
import fc from 'fast-check';
import { RunningApp, startApp, stopWithin } from './support/apps';
import { eventually } from './support/eventually';
import { searchSettings, searchTimeout } from './support/search';

const DEADLINE_SECONDS = 8;
/** Well inside the deadline: a shutdown that ends its connections takes a moment, not the deadline. */
const EXIT_WITHIN_MS = 5_000;

interface Answer {
  status: number;
  close: boolean;
}

/**
 * A client on one kept-alive connection, sending request after request, each head in two writes
 * `gapMs` apart (a request in progress most of the time, as a busy proxy's pooled connection is).
 * Records every answer until the server ends the connection or `stop()`.
 */
function keepAliveClient(app: RunningApp, gapMs: number) {
  const answers: Answer[] = [];
  let ended = false;
  let stopped = false;
  const socket: Socket = connect(Number(new URL(app.url).port), '127.0.0.1');
  socket.on('error', () => undefined);
  let received = Buffer.alloc(0);
  let answered: (() => void) | undefined;
  socket.on('data', (chunk: Buffer) => {
    received = Buffer.concat([received, chunk]);
    for (;;) {
      const end = received.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = received.subarray(0, end).toString('latin1');
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
      if (received.length < end + 4 + length) return;
      received = received.subarray(end + 4 + length);
      answers.push({ status: Number(head.slice(9, 12)), close: /\r\nconnection: *close/i.test(head) });
      answered?.();
    }
  });
  const done = new Promise<void>((resolve) => socket.once('close', () => ((ended = true), answered?.(), resolve())));
  const loop = (async () => {
    await new Promise<void>((resolve) => socket.once('connect', resolve).once('close', resolve));
    while (!ended && !stopped) {
      const next = new Promise<void>((resolve) => (answered = resolve));
      socket.write('GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n');
      await new Promise((resolve) => setTimeout(resolve, gapMs));
      if (!ended) socket.write('\r\n');
      await next;
    }
  })();
  return {
    answers,
    done,
    stop: async () => {
      stopped = true;
      socket.destroy();
      await loop;
    },
  };
}

/**
 * Node's `server.close()`, which Nest calls after the shutdown hooks, ends only the keep-alive
 * connections idle at that instant. A client that keeps sending on its connections — a load balancer
 * or proxy pooling its upstream connections, the usual deployment — kept them, and the shutdown, open
 * until SHUTDOWN_TIMEOUT_SECONDS: a rolling deploy under load ended in exit 1, the requests then in
 * flight cut. From the SIGTERM on, each answer carries `Connection: close`, so each connection ends
 * after the answer in flight on it. Searched: how many clients, how long each request takes to
 * arrive, when the signal comes, and which (SIGTERM, or Ctrl-C's SIGINT).
 */
describe('a graceful shutdown ends busy keep-alive connections', () => {
  it(
    'exits by the signal within moments while clients keep sending; the last answer on each connection says close',
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 1, max: 4 }),
          fc.integer({ min: 5, max: 40 }),
          fc.integer({ min: 0, max: 500 }),
          fc.constantFrom('SIGTERM' as const, 'SIGINT' as const),
          async (clients, gapMs, sigtermAfterMs, signal) => {
            const api = await startApp('command-api', { SHUTDOWN_TIMEOUT_SECONDS: String(DEADLINE_SECONDS) });
            const connections = Array.from({ length: clients }, () => keepAliveClient(api, gapMs));
            try {
              await eventually(
                () => connections.map(({ answers }) => answers.length),
                (counts) => counts.every((count) => count > 0),
                { what: 'every client answered once' },
              );
              await new Promise((resolve) => setTimeout(resolve, sigtermAfterMs));
              expect(await stopWithin(api, EXIT_WITHIN_MS, signal)).toEqual({ outcome: { code: null, signal }, deadline: false });
              for (const { answers } of connections) {
                expect(answers.every((answer) => answer.status === 200)).toBe(true);
                // The answer that says close is the connection's last.
                const closing = answers.findIndex((answer) => answer.close);
                expect(closing < 0 || closing === answers.length - 1).toBe(true);
              }
            } finally {
              await Promise.all(connections.map((connection) => connection.stop()));
              await api.stop('SIGKILL');
            }
          },
        ),
        // Ctrl-C's SIGINT once in every run, whatever the draws.
        { ...searchSettings({ fast: 3, long: 20 }), examples: [[2, 20, 200, 'SIGINT']] },
      );
    },
    searchTimeout(120_000),
  );
});
