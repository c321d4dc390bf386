import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { postgresOptions } from '@app/platform';
import { claimDue, settle, Settlement } from '../apps/notifier/src/webhooks/delivery-store';
import { privateDatabases } from './support/private-stack';

/**
 * The dispatcher's claim and settle against the real notifier database: a result settles the row only
 * under the lease it was POSTed under. A dispatcher whose lease ran out (a stall, a database outage
 * while it held results) must not overwrite what a newer claim of the same row recorded — even when
 * that newer claim is its own. On a notifier database of its own: a claim takes every due row.
 */
describe('webhook delivery leases', () => {
  let dataSource: DataSource;
  const tenantId = `t-leases-${randomUUID().slice(0, 8)}`;

  beforeAll(async () => {
    const { notifierUrl } = await privateDatabases('leases');
    dataSource = await new DataSource(postgresOptions({ url: notifierUrl, applicationName: 'e2e-leases', poolSize: 2 })).initialize();
  });
  afterAll(() => dataSource?.destroy());

  async function seed(): Promise<string> {
    const messageId = randomUUID();
    await dataSource.query(
      `INSERT INTO webhook_deliveries (message_id, tenant_id, order_id, event_type, url, payload, state, next_attempt_at)
       VALUES ($1, $2, $3, 'OrderPlaced', 'http://127.0.0.1:1/recorded', '{}', 'pending', now() - interval '1 hour')`,
      [messageId, tenantId, randomUUID()],
    );
    return messageId;
  }

  const result = (messageId: string, leaseId: string, state: Settlement['state'], url = 'http://127.0.0.1:2/configured'): Settlement => ({
    messageId,
    leaseId,
    url,
    state,
    statusCode: state === 'delivered' ? 204 : 503,
    retryInMs: state === 'pending' ? 60_000 : null,
    error: state === 'pending' ? 'receiver answered 503' : null,
  });

  it('a result settles only under the lease it was POSTed under; a stale one changes nothing', async () => {
    const messageId = await seed();
    const claim = async (leaseMs: number) =>
      (await claimDue(dataSource.manager, randomUUID(), leaseMs, 1_000)).find((d) => d.messageId === messageId)!;

    const first = await claim(1); // a lease that runs out at once: the dispatcher stalled
    await new Promise((resolve) => setTimeout(resolve, 20));
    const second = await claim(60_000);
    expect(second.leaseId).not.toBe(first.leaseId);

    // The stale result comes while the newer claim's POST is still out: it must not settle the row under it.
    expect(await settle(dataSource.manager, [result(messageId, first.leaseId, 'dead')])).toBe(0);
    const [leased] = await dataSource.query('SELECT state, attempts, lease_id FROM webhook_deliveries WHERE message_id = $1', [messageId]);
    expect(leased).toEqual({ state: 'pending', attempts: 0, lease_id: second.leaseId });
    expect(await settle(dataSource.manager, [result(messageId, second.leaseId, 'delivered')])).toBe(1);
    expect(await settle(dataSource.manager, [result(messageId, first.leaseId, 'pending')])).toBe(0);
    const [row] = await dataSource.query(
      'SELECT state, attempts, status_code, url, lease_id FROM webhook_deliveries WHERE message_id = $1',
      [messageId],
    );
    expect(row).toEqual({ state: 'delivered', attempts: 1, status_code: 204, url: 'http://127.0.0.1:2/configured', lease_id: null });
  });

  it('a leased row is not claimed again until its lease ends', async () => {
    const messageId = await seed();
    const mine = (rows: { messageId: string }[]) => rows.filter((d) => d.messageId === messageId);
    expect(mine(await claimDue(dataSource.manager, randomUUID(), 60_000, 1_000))).toHaveLength(1);
    expect(mine(await claimDue(dataSource.manager, randomUUID(), 60_000, 1_000))).toEqual([]);
  });
});
