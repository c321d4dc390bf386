import { createServer, Server } from 'node:http';
import { AddressInfo, createServer as createNetServer } from 'node:net';
import { postWebhook } from './post-webhook';

/** A real receiver on loopback answering `status` (with `headers`), closing idle connections after `keepAliveMs`. */
async function receiver(
  keepAliveMs: number,
  status = 204,
  headers: Record<string, string> = {},
): Promise<{ url: string; server: Server; bodies: string[] }> {
  const bodies: string[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      bodies.push(body);
      res.writeHead(status, headers).end();
    });
  });
  server.keepAliveTimeout = keepAliveMs;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, server, bodies };
}

const close = (server: Server) => new Promise<void>((resolve) => server.close(() => resolve()));

/** What a POST that got no whole answer within `ms` comes to: retried, with the bound in the reason. */
const timedOut = (ms: number) => ({ result: 'timeout', verdict: 'retry', statusCode: null, error: `no answer within ${ms} ms` });

describe('postWebhook', () => {
  it('delivers every POST when the receiver drops a kept-alive connection as it is reused', async () => {
    // A receiver that answers one request per connection, keeping it alive, and then drops the
    // connection when the next request arrives on it: what a receiver closing an idle connection
    // looks like to the POST that took it at that moment (nodejs/node#47130). None may fail for it.
    const answered: string[] = [];
    const server = createNetServer((socket) => {
      let served = false;
      socket.on('data', (chunk: Buffer) => {
        if (served) return void socket.destroy();
        served = true;
        answered.push(/^webhook-id: (\S+)$/im.exec(chunk.toString())?.[1] ?? 'a request without its webhook-id');
        socket.write('HTTP/1.1 204 No Content\r\nConnection: keep-alive\r\nKeep-Alive: timeout=60\r\n\r\n');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
      const outcomes: string[] = [];
      for (let i = 0; i < 50; i++) {
        const outcome = await postWebhook(url, { 'webhook-id': `msg_${i}` }, JSON.stringify({ n: i }), 2_000);
        outcomes.push(outcome.verdict === 'delivered' ? 'delivered' : `${outcome.result}: ${outcome.error}`);
      }
      expect(outcomes.filter((outcome) => outcome !== 'delivered')).toEqual([]);
      expect(new Set(answered).size).toBe(50);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('reads the answer: 503 with Retry-After is retried after it, 410 is refused, no answer in time is a timeout', async () => {
    const busy = await receiver(5_000, 503, { 'retry-after': '7' });
    const gone = await receiver(5_000, 410);
    const silent = createServer(() => undefined); // takes the request, never answers
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      expect(await postWebhook(busy.url, {}, '{}', 2_000)).toEqual({
        result: '5xx',
        verdict: 'retry',
        statusCode: 503,
        error: 'receiver answered 503',
        retryAfterMs: 7_000,
      });
      expect(await postWebhook(gone.url, {}, '{}', 2_000)).toMatchObject({ result: '4xx', verdict: 'refused', statusCode: 410 });
      const started = Date.now();
      const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/hook`;
      expect(await postWebhook(url, {}, '{}', 300)).toEqual(timedOut(300));
      expect(Date.now() - started).toBeLessThan(2_000);
    } finally {
      for (const server of [busy.server, gone.server, silent]) {
        server.closeAllConnections();
        await close(server);
      }
    }
  });

  it.each([408, 425, 429])('retries a %i, a 4xx that asks for patience, with its Retry-After', async (status) => {
    const patient = await receiver(5_000, status, { 'retry-after': '30' });
    try {
      expect(await postWebhook(patient.url, {}, '{}', 2_000)).toEqual({
        result: '4xx',
        verdict: 'retry',
        statusCode: status,
        error: `receiver answered ${status}`,
        retryAfterMs: 30_000,
      });
    } finally {
      patient.server.closeAllConnections();
      await close(patient.server);
    }
  });

  it('calls an answer whose body stops coming a timeout, not a lost connection', async () => {
    // Headers at once, then the body never ends: the timeout bounds the whole exchange.
    const stalling = createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-length': '10' });
      res.write('12345');
    });
    await new Promise<void>((resolve) => stalling.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(stalling.address() as AddressInfo).port}/hook`;
      expect(await postWebhook(url, {}, '{}', 300)).toEqual(timedOut(300));
    } finally {
      stalling.closeAllConnections();
      await close(stalling);
    }
  });

  it('reports a receiver that is not there as an error to retry', async () => {
    const { url, server } = await receiver(5_000);
    await close(server); // the port is free again: nothing listens
    expect(await postWebhook(url, {}, '{}', 2_000)).toEqual({
      result: 'error',
      verdict: 'retry',
      statusCode: null,
      error: 'POST failed: ECONNREFUSED',
    });
  });
});
