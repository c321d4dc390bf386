import { connect, Socket } from 'node:net';
import { startApp } from './support/apps';
import { eventually } from './support/eventually';
import { http } from './support/http';
import { OrdersDb } from './support/orders-db';

/** As in revoked-keys-stop-at-once: a NOTIFY's delivery, were anyone listening. */
const SETTLE_MS = 250;

/**
 * A graceful shutdown stops the API's listening for API-client changes before Nest closes the HTTP
 * server, and Node's `server.close()` ends only idle connections: one with a request in progress keeps
 * being served, request after request, until its client lets go. Whatever arrives on it meanwhile must
 * still see a revocation at once. Here a connection is opened and a request's head half sent before the
 * SIGTERM; once the API refuses new connections (its shutdown hooks have run) the key is revoked, and
 * then the head is finished: that request was sent after the revocation committed, so it is a 401.
 */
describe('a revoked API key stops working during a graceful shutdown too', () => {
  const db = new OrdersDb();
  afterAll(() => db.close());

  it('a request on a connection the shutdown keeps open is refused once its key is revoked', async () => {
    const api = await startApp('command-api', { API_KEY_CACHE_SECONDS: '600', RECEIPT_SWEEP_INTERVAL_SECONDS: '0' });
    const socket = connect(Number(new URL(api.url).port), '127.0.0.1');
    try {
      await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
      const { tenantId, apiKey, clientId } = await db.tenant();
      const path = `/v1/idempotency-receipts/orders.create/probe-${tenantId}`;
      // Authenticated, hence cached: no such receipt.
      expect((await http(`${api.url}${path}`, { headers: { Authorization: `Bearer ${apiKey}` } })).status).toBe(404);

      const answer = firstStatus(socket);
      socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${apiKey}\r\n`);
      const exited = api.stop('SIGTERM');
      const refusing = () =>
        fetch(`${api.url}/health/live`).then(
          () => false,
          () => true,
        );
      await eventually(refusing, (refused) => refused, { timeoutMs: 15_000, intervalMs: 20, what: 'the API refusing new connections' });
      await db.pool.query('UPDATE api_clients SET revoked_at = now() WHERE id = $1', [clientId]);
      await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
      socket.write('\r\n');

      expect(await answer).toBe(401);
      socket.end();
      expect(await exited).toEqual({ code: null, signal: 'SIGTERM' });
    } finally {
      socket.destroy();
      await api.stop('SIGKILL');
    }
  });
});

/** The status code of the first answer on `socket` (0 if it closes first). */
function firstStatus(socket: Socket): Promise<number> {
  return new Promise((resolve) => {
    let received = '';
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      const status = /^HTTP\/1\.1 (\d{3}) /.exec(received)?.[1];
      if (status) resolve(Number(status));
    });
    socket.on('error', () => undefined);
    socket.once('close', () => resolve(0));
  });
}
