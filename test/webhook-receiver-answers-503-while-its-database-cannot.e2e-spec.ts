import { Client } from 'pg';
import { RunningApp, startApp } from './support/apps';
import { newSecret, orderPlacedDelivery, postWebhook, ReceiverDb, signedHeaders } from './support/signed-webhooks';
import { TcpProxy } from './support/tcp-proxy';
import { testEnv } from './support/test-env';

/**
 * A verified delivery the receiver cannot store now is a 503 with Retry-After — the sender retries it
 * later — never a 2xx (the event would be lost) and never a 4xx (the sender would give up on it).
 * The real receiver, real PostgreSQL behind a TCP relay the test cuts.
 */
describe('the webhook receiver answers 503 while its database cannot answer', () => {
  const secret = newSecret();
  const db = new ReceiverDb();
  afterAll(() => db.close());

  it('when the database is unreachable; the retry afterwards is stored once', async () => {
    const url = new URL(testEnv.receiverUrl);
    const proxy = await TcpProxy.start({ host: url.hostname, port: Number(url.port || 5432) });
    url.port = String(proxy.port);
    let receiver: RunningApp | undefined;
    try {
      receiver = await startApp('webhook-receiver', { WEBHOOK_RECEIVER_DATABASE_URL: url.toString(), WEBHOOK_RECEIVER_SECRETS: secret });
      const delivery = orderPlacedDelivery();

      await proxy.cut();
      const during = await postWebhook(receiver.url, signedHeaders(delivery, [secret]), delivery.body);
      expect(during.status).toBe(503);
      expect(during.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(during.headers['retry-after']).toBeDefined();
      // Hostile input is still judged without the database: a 401, not a 503.
      expect((await postWebhook(receiver.url, signedHeaders(delivery, [newSecret()]), delivery.body)).status).toBe(401);

      await proxy.restore();
      const retried = await postWebhook(receiver.url, signedHeaders(delivery, [secret]), delivery.body);
      expect(retried.status).toBe(204);
      expect(retried.headers['idempotent-replayed']).toBeUndefined();
      expect(await db.rowsForOrder(delivery.orderId)).toHaveLength(1);
    } finally {
      await receiver?.stop();
      await proxy.cut();
    }
  });

  it('when the same webhook-id is held by a transaction that does not finish', async () => {
    const receiver = await startApp('webhook-receiver', { WEBHOOK_RECEIVER_SECRETS: secret });
    const holder = new Client({ connectionString: testEnv.receiverUrl });
    await holder.connect();
    const delivery = orderPlacedDelivery();
    try {
      await holder.query('BEGIN');
      await holder.query(
        /* sql */ `INSERT INTO received_webhooks (webhook_id, event_type, tenant_id, order_id, payload, signed_at)
                   VALUES ($1, 'order.placed', $2, $3, '{}', now())`,
        [delivery.id, delivery.tenantId, delivery.orderId],
      );
      const waiting = await postWebhook(receiver.url, signedHeaders(delivery, [secret]), delivery.body);
      expect(waiting.status).toBe(503);
      expect(waiting.headers['retry-after']).toBeDefined();
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
    try {
      // The holder rolled back: the retry is the first to store it.
      const retried = await postWebhook(receiver.url, signedHeaders(delivery, [secret]), delivery.body);
      expect(retried.status).toBe(204);
      expect(retried.headers['idempotent-replayed']).toBeUndefined();
      expect(await db.rowsForOrder(delivery.orderId)).toHaveLength(1);
    } finally {
      await receiver.stop();
    }
  });
});
