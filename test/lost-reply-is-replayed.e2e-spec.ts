import { connect } from 'node:net';
import { ApiClientSession, commandApiFixture } from './support/command-api';

/** Writes a request and hangs up as the first bytes of the reply arrive, without reading them. */
async function sendAndDiscardReply(url: string, path: string, headers: Record<string, string>, body: string): Promise<void> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  const head = Object.entries({ ...headers, Host: `${hostname}:${port}`, 'Content-Length': String(Buffer.byteLength(body)) })
    .map(([name, value]) => `${name}: ${value}`)
    .join('\r\n');
  const replied = new Promise<void>((resolve) => socket.once('data', () => resolve()));
  socket.write(`POST ${path} HTTP/1.1\r\n${head}\r\n\r\n${body}`);
  await replied;
  socket.destroy();
}

describe('a committed command whose reply the client never read', () => {
  const suite = commandApiFixture();
  const { db } = suite;

  it('is replayed from a fresh connection, and the receipt tells the client without resending', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    const body = { sku: 'SKU-9', quantity: 1 };

    await sendAndDiscardReply(
      suite.api.url,
      '/v1/orders',
      { Authorization: `Bearer ${apiKey}`, 'Idempotency-Key': 'committed-no-reply', 'Content-Type': 'application/json' },
      JSON.stringify(body),
    );

    // The client never learned the outcome; that does not mean the server did nothing. It asks the receipt.
    const receipt = await client.get('/v1/idempotency-receipts/orders.create/committed-no-reply');
    expect(receipt.status).toBe(200);
    expect(receipt.body).toMatchObject({ status: 'completed', responseStatus: 201, effect: { type: 'order' } });

    const retried = await client.createOrder('committed-no-reply', body);
    expect(retried.status).toBe(201);
    expect(retried.headers['idempotent-replayed']).toBe('true');
    expect(retried.body.id).toBe(receipt.body.effect.id);
    expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });
  });
});
