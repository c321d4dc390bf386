import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Pool } from 'pg';
import { Topics } from '@app/contracts';
import { RunningApp, startApp } from './support/apps';
import { ApiClientSession } from './support/command-api';
import { ensureServiceTopics, skipConsumerBacklog, testKafka } from './support/kafka';
import { json, ops, OpsRun } from './support/ops-cli';
import { PrivateDatabases, privateDatabases } from './support/private-stack';
import { WebhookReceiver } from './support/webhook-receiver';
import { eventually } from './support/eventually';

const run = promisify(execFile);

const CHECKS = [
  'receipts-have-effects',
  'orders-have-outbox-events',
  'outbox-events-have-orders',
  'published-events-reached-consumers',
  'consumer-inbox-entries-have-outbox-rows',
  'notifier-events-have-webhook-deliveries',
];

/** The report of a failed audit: exit 1, one reason on stderr, the one JSON line on stdout. */
function failedReport(audit: OpsRun): { ok: boolean; checks: any[] } {
  expect({ status: audit.status, stderrLines: audit.stderr.trim().split('\n').length }).toEqual({ status: 1, stderrLines: 1 });
  return JSON.parse(audit.stdout);
}

function check(report: { checks: any[] }, name: string): any {
  return report.checks.find((c) => c.name === name);
}

/** Each check's mismatch count, by name. */
function mismatches(report: { checks: any[] }): Record<string, number> {
  return Object.fromEntries(report.checks.map((c) => [c.name, c.mismatches]));
}

/**
 * The whole chain runs on databases of this suite's own (it audits whole tables and restores a dump
 * over its orders database), with consumer groups moved past what earlier suites left on the topic.
 */
describe('ops audit checks that effects, receipts, events and inboxes describe the same facts', () => {
  const receiver = new WebhookReceiver();
  const apps: RunningApp[] = [];
  const dump = join(tmpdir(), `audit-e2e-${randomUUID()}.dump`);
  const tenant = `audit-${randomUUID().slice(0, 8)}`;
  let dbs: PrivateDatabases;
  let orders: Pool;
  let fulfillment: Pool;
  let notifier: Pool;
  let client: ApiClientSession;
  /** Batch 1 (in the dump): o1, o2, o1 cancelled. Batch 2 (after it): o3, o4, o3 cancelled. */
  const ids: Record<'o1' | 'o2' | 'o3' | 'o4', string> = { o1: '', o2: '', o3: '', o4: '' };
  let laterMessageIds: string[] = [];

  const audit = (args: string[] = []) => ops(['audit', ...args], dbs.env);

  async function outboxIds(): Promise<string[]> {
    const { rows } = await orders.query(`SELECT id FROM outbox_messages ORDER BY sequence`);
    return rows.map((row) => row.id);
  }

  /** Until every outbox row is published and in both consumers' inboxes. */
  async function consumersCaughtUp(expectedEvents: number): Promise<void> {
    const progress = async () => {
      const ids = await outboxIds();
      const { rows } = await orders.query(`SELECT count(*)::int AS n FROM outbox_messages WHERE published_at IS NULL`);
      const inboxCount = async (pool: Pool) =>
        (await pool.query(`SELECT count(*)::int AS n FROM inbox_messages WHERE message_id = ANY($1::uuid[])`, [ids])).rows[0].n;
      const [fulfilled, notified] = await Promise.all([inboxCount(fulfillment), inboxCount(notifier)]);
      return { events: ids.length, unpublished: rows[0].n, fulfilled, notified };
    };
    await eventually(
      progress,
      (p) => p.events === expectedEvents && p.unpublished === 0 && p.fulfilled === p.events && p.notified === p.events,
      { timeoutMs: 120_000, intervalMs: 200, what: 'both consumers caught up with every outbox row' },
    );
  }

  async function placeOrder(key: string): Promise<string> {
    const created = await client.createOrder(key, { sku: 'SKU-AUDIT', quantity: 1 });
    expect(created.status).toBe(201);
    return created.body.id;
  }

  async function cancelOrder(orderId: string, key: string): Promise<void> {
    expect((await client.cancelOrder(orderId, key, { reason: 'audit e2e' })).status).toBe(200);
  }

  beforeAll(async () => {
    dbs = await privateDatabases('audit');
    orders = new Pool({ connectionString: dbs.ordersUrl, max: 2 });
    fulfillment = new Pool({ connectionString: dbs.fulfillmentUrl, max: 2 });
    notifier = new Pool({ connectionString: dbs.notifierUrl, max: 2 });
    const kafka = testKafka('e2e-audit');
    await ensureServiceTopics(kafka);
    await skipConsumerBacklog(kafka, ['fulfillment', 'notifier'], Topics.orderEvents);
    await receiver.start();
    const consumerEnv = { ...dbs.env, KAFKA_SESSION_TIMEOUT_MS: '6000' };
    // One at a time: each boots Nest, and the machine is shared.
    apps.push(await startApp('command-api', dbs.env));
    apps.push(await startApp('outbox-relay', { ...dbs.env, RELAY_POLL_INTERVAL_MS: '200' }));
    apps.push(await startApp('fulfillment', consumerEnv));
    apps.push(await startApp('notifier', { ...consumerEnv, WEBHOOK_URL: receiver.url }));
    const credentials = json(await ops(['clients:create', '--tenant', tenant, '--json'], dbs.env));
    client = new ApiClientSession(apps[0].url, credentials.apiKey);

    ids.o1 = await placeOrder('order-1');
    ids.o2 = await placeOrder('order-2');
    await cancelOrder(ids.o1, 'cancel-1');
    await consumersCaughtUp(3);
    await run('pg_dump', ['--format=custom', '--file', dump, '--dbname', dbs.ordersUrl]);

    ids.o3 = await placeOrder('order-3');
    ids.o4 = await placeOrder('order-4');
    // Named in upper case, as a client may: the event must still be the order's, under its canonical id.
    await cancelOrder(ids.o3.toUpperCase(), 'cancel-3');
    await consumersCaughtUp(6);
    laterMessageIds = (await outboxIds()).slice(3);
  }, 300_000);

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.stop()));
    await receiver.stop();
    await Promise.all([orders?.end(), fulfillment?.end(), notifier?.end()]);
    await rm(dump, { force: true });
  });

  it('passes every check on a healthy chain, each having checked something, in JSON and in words', async () => {
    // The consumers have caught up, so no grace is needed: every published event is checked.
    const [asJson, asText] = await Promise.all([audit(['--json', '--grace-seconds', '0']), audit(['--grace-seconds', '0'])]);

    const report = json(asJson);
    expect(report.ok).toBe(true);
    // 4 creates + 2 cancels; 4 OrderPlaced + 2 OrderCancelled; each of the 6 events in each of 2 consumers.
    expect(report.checks.map((c: any) => [c.name, c.checked, c.mismatches, c.examples])).toEqual([
      ['receipts-have-effects', 6, 0, []],
      ['orders-have-outbox-events', 6, 0, []],
      ['outbox-events-have-orders', 6, 0, []],
      ['published-events-reached-consumers', 12, 0, []],
      ['consumer-inbox-entries-have-outbox-rows', 12, 0, []],
      // Each of the 6 events applied by the notifier has its webhook delivery (pending ones are no mismatch).
      ['notifier-events-have-webhook-deliveries', 6, 0, []],
    ]);

    expect(asText.status).toBe(0);
    expect(asText.stderr).toBe('');
    expect(asText.stdout).toMatch(/all 6 checks passed/);
    for (const name of CHECKS) expect(asText.stdout).toMatch(new RegExp(`ok\\s+${name}\\s+checked \\d+, mismatches 0`));
  }, 180_000);

  it('names the receipt whose order is gone, the order whose event is gone, the event a consumer never recorded and a tenant mix-up', async () => {
    const eventOf = async (orderId: string, type: string) =>
      (await orders.query(`SELECT id FROM outbox_messages WHERE message_key = $1 AND event_type = $2`, [orderId, type])).rows[0].id;
    const o1Cancelled = await eventOf(ids.o1, 'OrderCancelled');
    const o3Cancelled = await eventOf(ids.o3, 'OrderCancelled');
    const o4Placed = await eventOf(ids.o4, 'OrderPlaced');

    const removedOrder = (await orders.query(`DELETE FROM orders t WHERE id = $1 RETURNING to_jsonb(t) AS row`, [ids.o2])).rows[0].row;
    const removedEvent = (await orders.query(`DELETE FROM outbox_messages t WHERE id = $1 RETURNING to_jsonb(t) AS row`, [o4Placed]))
      .rows[0].row;
    const removedEntry = (
      await fulfillment.query(
        `DELETE FROM inbox_messages t WHERE consumer = 'fulfillment' AND message_id = $1 RETURNING to_jsonb(t) AS row`,
        [o3Cancelled],
      )
    ).rows[0].row;
    await orders.query(`UPDATE outbox_messages SET tenant_id = 'intruder' WHERE id = $1`, [o1Cancelled]);
    try {
      const [asJson, asText] = await Promise.all([audit(['--json', '--grace-seconds', '0']), audit(['--grace-seconds', '0'])]);
      const report = failedReport(asJson);
      expect(report.ok).toBe(false);
      expect(asJson.stderr).toMatch(/^ops: audit found mismatches: receipts-have-effects \(1\), orders-have-outbox-events \(2\)/);
      expect(mismatches(report)).toEqual({
        'receipts-have-effects': 1,
        'orders-have-outbox-events': 2,
        'outbox-events-have-orders': 2,
        'published-events-reached-consumers': 1,
        'consumer-inbox-entries-have-outbox-rows': 2,
        'notifier-events-have-webhook-deliveries': 0,
      });
      expect(check(report, 'receipts-have-effects').examples).toEqual([
        expect.objectContaining({
          problem: 'receipt names an order that does not exist',
          tenant,
          key: 'order-2',
          effect: `order:${ids.o2}`,
        }),
      ]);
      expect(check(report, 'orders-have-outbox-events').examples).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ order: ids.o4, event: 'OrderPlaced' }),
          expect.objectContaining({ order: ids.o1, event: 'OrderCancelled' }),
        ]),
      );
      expect(check(report, 'outbox-events-have-orders').examples).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ problem: 'event names an order that does not exist', order: ids.o2 }),
          expect.objectContaining({ problem: "event tenant differs from its order's tenant", messageId: o1Cancelled, orderTenant: tenant }),
        ]),
      );
      expect(check(report, 'published-events-reached-consumers').examples).toEqual([
        expect.objectContaining({ consumer: 'fulfillment', messageId: o3Cancelled, event: 'OrderCancelled' }),
      ]);
      expect(
        check(report, 'consumer-inbox-entries-have-outbox-rows')
          .examples.map((e: any) => [e.consumer, e.messageId])
          .sort(),
      ).toEqual([
        ['fulfillment', o4Placed],
        ['notifier', o4Placed],
      ]);
      for (const failed of report.checks.filter((c) => c.mismatches)) expect(failed.hint).toMatch(/docs\/audit\.md/);

      expect(asText.status).toBe(1);
      expect(asText.stdout).toMatch(/5 of 6 checks found mismatches/);
      expect(asText.stdout).toMatch(new RegExp(`FAIL\\s+receipts-have-effects\\s+checked 6, mismatches 1`));
      expect(asText.stdout).toContain(`receipt names an order that does not exist: tenant=${tenant} operation=orders.create key=order-2`);
    } finally {
      await orders.query(`INSERT INTO orders SELECT * FROM jsonb_populate_record(null::orders, $1)`, [removedOrder]);
      await orders.query(
        `INSERT INTO outbox_messages OVERRIDING SYSTEM VALUE SELECT * FROM jsonb_populate_record(null::outbox_messages, $1)`,
        [removedEvent],
      );
      await fulfillment.query(`INSERT INTO inbox_messages SELECT * FROM jsonb_populate_record(null::inbox_messages, $1)`, [removedEntry]);
      await orders.query(`UPDATE outbox_messages SET tenant_id = $2 WHERE id = $1`, [o1Cancelled, tenant]);
    }
  }, 180_000);

  it("names a receipt of another tenant's order, a cancel receipt whose order is not cancelled, and an event whose payload names another tenant or order", async () => {
    const eventOf = async (orderId: string, type: string) =>
      (await orders.query(`SELECT id FROM outbox_messages WHERE message_key = $1 AND event_type = $2`, [orderId, type])).rows[0].id;
    const [o2Placed, o4Placed] = [await eventOf(ids.o2, 'OrderPlaced'), await eventOf(ids.o4, 'OrderPlaced')];
    const stranger = randomUUID();
    await orders.query(`UPDATE idempotency_receipts SET tenant_id = 'intruder' WHERE tenant_id = $1 AND idempotency_key = 'order-4'`, [
      tenant,
    ]);
    await orders.query(`UPDATE orders SET status = 'placed' WHERE id = $1`, [ids.o3]);
    await orders.query(`UPDATE outbox_messages SET payload = jsonb_set(payload, '{tenantId}', '"intruder"') WHERE id = $1`, [o2Placed]);
    await orders.query(`UPDATE outbox_messages SET payload = jsonb_set(payload, '{orderId}', to_jsonb($2::text)) WHERE id = $1`, [
      o4Placed,
      stranger,
    ]);
    try {
      const report = failedReport(await audit(['--json', '--grace-seconds', '0']));
      expect(mismatches(report)).toMatchObject({ 'receipts-have-effects': 2, 'outbox-events-have-orders': 2 });
      expect(check(report, 'receipts-have-effects').examples).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ problem: 'receipt names an order of another tenant', tenant: 'intruder', key: 'order-4' }),
          expect.objectContaining({ problem: 'receipt says cancelled, the order is not', tenant, key: 'cancel-3' }),
        ]),
      );
      expect(check(report, 'outbox-events-have-orders').examples).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ problem: 'event payload names another tenant', messageId: o2Placed }),
          expect.objectContaining({ problem: 'event payload names another order', messageId: o4Placed }),
        ]),
      );
    } finally {
      await orders.query(`UPDATE idempotency_receipts SET tenant_id = $1 WHERE tenant_id = 'intruder' AND idempotency_key = 'order-4'`, [
        tenant,
      ]);
      await orders.query(`UPDATE orders SET status = 'cancelled' WHERE id = $1`, [ids.o3]);
      await orders.query(`UPDATE outbox_messages SET payload = jsonb_set(payload, '{tenantId}', to_jsonb($2::text)) WHERE id = $1`, [
        o2Placed,
        tenant,
      ]);
      await orders.query(`UPDATE outbox_messages SET payload = jsonb_set(payload, '{orderId}', to_jsonb($2::text)) WHERE id = $1`, [
        o4Placed,
        ids.o4,
      ]);
    }
  }, 120_000);

  it('names an event keyed by another spelling of its order id, as cancels were written before ids were canonical', async () => {
    const { rows } = await orders.query(
      `UPDATE outbox_messages SET message_key = upper(message_key), payload = jsonb_set(payload, '{orderId}', to_jsonb(upper(message_key)))
       WHERE message_key = $1 AND event_type = 'OrderCancelled' RETURNING id`,
      [ids.o1],
    );
    try {
      const report = failedReport(await audit(['--json', '--grace-seconds', '0']));
      expect(mismatches(report)).toMatchObject({ 'orders-have-outbox-events': 1, 'outbox-events-have-orders': 1 });
      expect(check(report, 'outbox-events-have-orders').examples).toEqual([
        expect.objectContaining({
          problem: "event is keyed by another spelling of its order id: another Kafka key than the order's other events",
          messageId: rows[0].id,
          order: ids.o1.toUpperCase(),
        }),
      ]);
      expect(check(report, 'outbox-events-have-orders').hint).toMatch(/another spelling of its order id/);
      expect(check(report, 'orders-have-outbox-events').examples).toEqual([
        expect.objectContaining({ order: ids.o1, event: 'OrderCancelled' }),
      ]);
    } finally {
      await orders.query(
        `UPDATE outbox_messages SET message_key = $1, payload = jsonb_set(payload, '{orderId}', to_jsonb($1::text)) WHERE id = $2`,
        [ids.o1, rows[0].id],
      );
    }
  }, 120_000);

  it('after the orders database is restored from an older dump, names the events the consumers remember and it forgot', async () => {
    await Promise.all(apps.splice(0).map((app) => app.stop()));
    await run('pg_restore', ['--clean', '--if-exists', '--single-transaction', '--no-owner', '--dbname', dbs.ordersUrl, dump]);

    const [asJson, asText, limited] = await Promise.all([
      audit(['--json', '--grace-seconds', '0']),
      audit(['--grace-seconds', '0']),
      audit(['--json', '--grace-seconds', '0', '--limit', '1']),
    ]);
    const report = failedReport(asJson);
    expect(asJson.stderr).toBe('ops: audit found mismatches: consumer-inbox-entries-have-outbox-rows (6)\n');
    // The restored database is consistent with itself; only the consumers show what it forgot.
    expect(mismatches(report)).toEqual({
      'receipts-have-effects': 0,
      'orders-have-outbox-events': 0,
      'outbox-events-have-orders': 0,
      'published-events-reached-consumers': 0,
      'consumer-inbox-entries-have-outbox-rows': 6,
      'notifier-events-have-webhook-deliveries': 0,
    });
    const gap = check(report, 'consumer-inbox-entries-have-outbox-rows');
    expect(gap.checked).toBe(12);
    expect(gap.examples.map((e: any) => [e.consumer, e.messageId]).sort()).toEqual(
      [...laterMessageIds.map((id) => ['fulfillment', id]), ...laterMessageIds.map((id) => ['notifier', id])].sort(),
    );
    expect(gap.examples[0].problem).toBe('consumer remembers an event the orders database does not have');
    expect(gap.hint).toMatch(/restored from an OLDER backup.*Idempotency-Key would execute it again/);

    expect(asText.status).toBe(1);
    expect(asText.stdout).toMatch(/FAIL\s+consumer-inbox-entries-have-outbox-rows\s+checked 12, mismatches 6/);
    expect(asText.stdout).toContain(`messageId=${laterMessageIds[0]}`);
    expect(asText.stdout).toMatch(/restored from an OLDER backup/);

    const first = failedReport(limited);
    expect(check(first, 'consumer-inbox-entries-have-outbox-rows')).toMatchObject({ mismatches: 6, examples: [expect.any(Object)] });

    // What the audit warns about: the receipts of the lost window are gone too, so a retry executes again.
    const api = await startApp('command-api', dbs.env);
    apps.push(api);
    const retried = await new ApiClientSession(api.url, client.apiKey).createOrder('order-3', { sku: 'SKU-AUDIT', quantity: 1 });
    expect(retried.status).toBe(201);
    expect(retried.headers['idempotent-replayed']).toBeUndefined();
    expect(retried.body.id).not.toBe(ids.o3);
  }, 240_000);
});

/**
 * The notifier's own check, on databases of this suite's own seeded with SQL as the notifier leaves
 * them (no app runs). The orders side stays empty: the seeded inbox entries were received two hours
 * ago and the audit is told the outbox keeps rows for one hour, so only the notifier's check (bounded
 * by the notifier's inbox retention, 14 days) looks at them.
 */
describe('ops audit checks that every order event the notifier applied has its webhook delivery', () => {
  let dbs: PrivateDatabases;
  let notifier: Pool;
  const NAME = 'notifier-events-have-webhook-deliveries';
  const audit = (args: string[] = []) => ops(['audit', ...args], { ...dbs.env, OUTBOX_RETENTION_SECONDS: '3600' });
  let offset = 0;

  /** An inbox entry of the notifier, received `receivedAgoSeconds` ago (two hours by default). */
  async function entry(eventType: string, outcome = 'applied', receivedAgoSeconds = 7200): Promise<string> {
    const id = randomUUID();
    await notifier.query(
      `INSERT INTO inbox_messages (consumer, message_id, topic, kafka_partition, kafka_offset, event_type, outcome, received_at)
       VALUES ('notifier', $1, $2, 0, $3, $4, $5, now() - make_interval(secs => $6))`,
      [id, Topics.orderEvents, offset++, eventType, outcome, receivedAgoSeconds],
    );
    return id;
  }

  /** Its delivery, recorded with it, in `state`. */
  async function delivery(
    messageId: string,
    eventType: string,
    state: 'pending' | 'delivered' | 'dead',
    attempts: number,
    lastError: string | null = null,
  ) {
    await notifier.query(
      `INSERT INTO webhook_deliveries (message_id, tenant_id, order_id, event_type, url, payload, state, attempts, last_error,
                                       created_at, next_attempt_at, delivered_at, dead_at)
       VALUES ($1, 'audit-wh', gen_random_uuid(), $2, 'http://127.0.0.1:9/hooks', '{}', $3::text, $4, $5, now() - interval '2 hours',
               CASE WHEN $3::text = 'pending' THEN now() + interval '1 hour' END,
               CASE WHEN $3::text = 'delivered' THEN now() - interval '2 hours' END, CASE WHEN $3::text = 'dead' THEN now() END)`,
      [messageId, eventType, state, attempts, lastError],
    );
  }

  beforeAll(async () => {
    dbs = await privateDatabases('auditwh');
    notifier = new Pool({ connectionString: dbs.notifierUrl, max: 2 });
    await notifier.query(`INSERT INTO inbox_consumers (consumer, retention_seconds) VALUES ('notifier', 14 * 24 * 3600)`);
  });

  afterAll(async () => {
    await notifier?.end();
  });

  it('reports a pending delivery without calling it a mismatch, and skips what the notifier skipped or may have forgotten', async () => {
    await delivery(await entry('OrderPlaced'), 'OrderPlaced', 'delivered', 1);
    await delivery(await entry('OrderCancelled'), 'OrderCancelled', 'pending', 3, 'HTTP 503');
    await entry('OrderPlaced', 'skipped'); // a version newer than the notifier reads: no webhook
    await entry('OrderPlaced', 'applied', 20 * 24 * 3600); // older than its retention: its delivery may be swept

    const [asJson, asText] = await Promise.all([audit(['--json']), audit()]);
    const report = json(asJson);
    expect(report.ok).toBe(true);
    expect(report.checks.map((c: any) => c.name)).toEqual(CHECKS);
    expect(check(report, NAME)).toEqual({
      name: NAME,
      checked: 2,
      mismatches: 0,
      examples: [],
      notes: [
        {
          note: expect.stringContaining('pending, not a mismatch'),
          pending: 1,
          inFlight: 0,
          retrying: 1,
          oldestPendingAge: expect.stringMatching(/^2h/),
          oldestPendingAgeSeconds: expect.any(Number),
          oldestPendingSince: expect.any(String),
        },
      ],
    });
    expect(check(report, NAME).notes[0].oldestPendingAgeSeconds).toBeGreaterThanOrEqual(7200);

    expect(asText.status).toBe(0);
    expect(asText.stdout).toMatch(/all 6 checks passed/);
    expect(asText.stdout).toMatch(
      new RegExp(
        `ok\\s+${NAME}\\s+checked 2, mismatches 0\\n\\s+note: webhook deliveries pending, not a mismatch .*: pending=1 inFlight=0 retrying=1 oldestPendingAge=2h`,
      ),
    );
  });

  it('names a dead delivery and an applied event without any delivery as mismatches, pointing at webhooks:retry', async () => {
    const dead = await entry('OrderCancelled');
    await delivery(dead, 'OrderCancelled', 'dead', 1, 'refused: HTTP 410');
    const missing = await entry('OrderPlaced');
    try {
      const [asJson, asText] = await Promise.all([audit(['--json']), audit()]);
      const report = failedReport(asJson);
      expect(asJson.stderr).toBe(`ops: audit found mismatches: ${NAME} (2)\n`);
      expect(mismatches(report)).toEqual(Object.fromEntries(CHECKS.map((name) => [name, name === NAME ? 2 : 0])));
      const found = check(report, NAME);
      expect(found.checked).toBe(4);
      expect(found.examples).toEqual(
        expect.arrayContaining([
          expect.objectContaining({
            problem: 'webhook delivery is dead: given up, the receiver does not have it',
            database: 'notifier',
            consumer: 'notifier',
            messageId: dead,
            event: 'OrderCancelled',
            tenant: 'audit-wh',
            lastError: 'refused: HTTP 410',
            deadAt: expect.any(String),
          }),
          expect.objectContaining({
            problem: 'applied order event has no webhook delivery',
            messageId: missing,
            event: 'OrderPlaced',
            tenant: null,
          }),
        ]),
      );
      expect(found.hint).toMatch(/npm run ops -- webhooks:retry/);
      expect(found.notes).toEqual([expect.objectContaining({ pending: 1 })]);

      expect(asText.status).toBe(1);
      expect(asText.stdout).toMatch(new RegExp(`FAIL\\s+${NAME}\\s+checked 4, mismatches 2`));
      expect(asText.stdout).toContain(
        `webhook delivery is dead: given up, the receiver does not have it: database=notifier consumer=notifier messageId=${dead}`,
      );
      expect(asText.stdout).toContain(
        `applied order event has no webhook delivery: database=notifier consumer=notifier messageId=${missing}`,
      );
    } finally {
      await notifier.query(`DELETE FROM webhook_deliveries WHERE message_id = $1`, [dead]);
      await notifier.query(`DELETE FROM inbox_messages WHERE message_id = ANY($1::uuid[])`, [[dead, missing]]);
    }
  });
});

describe('ops audit refuses', () => {
  it.each([
    [
      'an unreachable orders database',
      ['--json'],
      { ORDERS_DATABASE_URL: 'postgres://postgres@127.0.0.1:1/orders_test' },
      1,
      /^ops: cannot reach the orders database/,
    ],
    [
      'an unreachable consumer database',
      ['--json'],
      { NOTIFIER_DATABASE_URL: 'postgres://postgres@127.0.0.1:1/notifier_test' },
      1,
      /^ops: cannot reach the notifier database/,
    ],
    ['a --limit that is not a number', ['--limit', 'ten'], {}, 2, /--limit must be an integer 0-1000/],
    ['a negative --limit', ['--limit=-1'], {}, 2, /--limit must be an integer 0-1000/],
    ['a fractional --grace-seconds', ['--grace-seconds', '1.5'], {}, 2, /--grace-seconds must be an integer 0-86400/],
    ['an unknown flag', ['--since', 'yesterday'], {}, 2, /unknown option '--since'/],
  ])('%s with one line on stderr', async (_, args, env, status, reason) => {
    const refused = await ops(['audit', ...args], env);
    expect(refused.status).toBe(status);
    expect(refused.stdout).toBe('');
    expect(refused.stderr.trim().split('\n')).toEqual([expect.stringMatching(reason)]);
  });
});
