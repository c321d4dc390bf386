import { randomUUID } from 'node:crypto';
import { RunningApp, startApp } from './support/apps';
import { ApiClientSession } from './support/command-api';
import { FulfillmentDb } from './support/fulfillment-db';
import { http } from './support/http';
import { NotifierDb } from './support/notifier-db';
import { logLine, logLines, sample, scrape } from './support/observe';
import { OrdersDb } from './support/orders-db';
import { TcpProxy } from './support/tcp-proxy';
import { testEnv } from './support/test-env';
import { WebhookReceiver } from './support/webhook-receiver';
import { CANONICAL_UUID_PATTERN } from '@app/contracts';

const UUID = CANONICAL_UUID_PATTERN;
const PROMETHEUS_TEXT = /^text\/plain; .*version=0\.0\.4/;

/** Each app's own metrics besides the default process ones: name and Prometheus type. */
const KEY_METRICS: Record<string, [string, string][]> = {
  'command-api': [
    ['idempotency_requests_total', 'counter'],
    ['idempotency_replay_cache_hits_total', 'counter'],
    ['http_request_duration_seconds', 'histogram'],
    ['http_database_unavailable_responses_total', 'counter'],
  ],
  'outbox-relay': [
    ['outbox_published_total', 'counter'],
    ['outbox_publish_failures_total', 'counter'],
    ['outbox_backlog_messages', 'gauge'],
    ['outbox_oldest_unpublished_age_seconds', 'gauge'],
    ['outbox_parked_messages', 'gauge'],
    ['outbox_relay_kafka_up', 'gauge'],
    ['outbox_relay_sessions_ended_total', 'counter'],
    ['outbox_claim_duration_seconds', 'histogram'],
  ],
  fulfillment: [
    ['fulfillment_messages_total', 'counter'],
    ['fulfillment_consumer_lag', 'gauge'],
  ],
  notifier: [
    ['notifier_messages_total', 'counter'],
    ['notifier_webhook_attempts_total', 'counter'],
    ['notifier_webhook_deliveries_total', 'counter'],
    ['notifier_consumer_lag', 'gauge'],
  ],
};

/**
 * What operators watch: every app's /metrics, the command API's outcome counters and request log
 * (request id, tenant, operation, idempotency outcome, outbox message-id, never the key), and the
 * consumers' and relay's logs for the event that command wrote.
 */
describe('observability', () => {
  const orders = new OrdersDb();
  const fulfillmentDb = new FulfillmentDb();
  const notifierDb = new NotifierDb();
  const receiver = new WebhookReceiver();
  let proxy: TcpProxy;
  const apps: Record<string, RunningApp> = {};

  beforeAll(async () => {
    // The API reaches PostgreSQL through a proxy, so one test can take the database away.
    const url = new URL(testEnv.ordersUrl);
    proxy = await TcpProxy.start({ host: url.hostname, port: Number(url.port || 5432) });
    url.port = String(proxy.port);
    await receiver.start();
    apps['command-api'] = await startApp('command-api', { ORDERS_DATABASE_URL: url.toString() });
    apps['outbox-relay'] = await startApp('outbox-relay', { RELAY_POLL_INTERVAL_MS: '200' });
    apps.fulfillment = await startApp('fulfillment', { KAFKA_SESSION_TIMEOUT_MS: '6000' });
    apps.notifier = await startApp('notifier', { KAFKA_SESSION_TIMEOUT_MS: '6000', WEBHOOK_URL: receiver.url });
  });
  afterAll(async () => {
    await Promise.all(Object.values(apps).map((app) => app.stop()));
    await proxy?.cut();
    await receiver.stop();
    await Promise.all([orders.close(), fulfillmentDb.close(), notifierDb.close()]);
  });

  const api = () => apps['command-api'];
  const outcomes = (text: string, operation = 'orders.create') =>
    Object.fromEntries(
      ['created', 'replayed', 're-executed', 'conflict', 'in-progress'].map((outcome) => [
        outcome,
        sample(text, 'idempotency_requests_total', { operation, outcome }),
      ]),
    );
  const completed = (requestId: string) => (line: Record<string, any>) => line.requestId === requestId && line.msg === 'request completed';

  it('every app serves /metrics in Prometheus text format, unauthenticated, with process metrics and its own, outside its OpenAPI document', async () => {
    for (const [name, metrics] of Object.entries(KEY_METRICS)) {
      const { status, contentType, text } = await scrape(apps[name]);
      expect({ name, status, contentType }).toEqual({ name, status: 200, contentType: expect.stringMatching(PROMETHEUS_TEXT) });
      for (const line of text.split('\n').filter((l) => l && !l.startsWith('#'))) {
        expect(line).toMatch(/^[a-zA-Z_:][\w:]*(\{[^}]*\})? \S+$/);
      }
      const declared = [...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map(([, metric, type]) => [metric, type]);
      expect({ name, declared }).toEqual({
        name,
        declared: expect.arrayContaining([
          ['process_cpu_user_seconds_total', 'counter'],
          ['nodejs_heap_size_used_bytes', 'gauge'],
          ['http_request_duration_seconds', 'histogram'],
          ...metrics,
        ]),
      });
      const doc = (await http(`${apps[name].managementUrl}/docs-json`)).body;
      expect({ name, metricsDocumented: Object.keys(doc.paths).includes('/metrics') }).toEqual({ name, metricsDocumented: false });
    }
  });

  it('counts a create, a replay and a conflict once each, and logs each with request id, tenant, operation, outcome and message-id, never the key', async () => {
    const { tenantId, apiKey } = await orders.tenant();
    const client = new ApiClientSession(api().url, apiKey);
    const key = `obs-${randomUUID()}`;
    const ids = { create: `create-${randomUUID()}`, replay: `replay-${randomUUID()}`, conflict: `conflict-${randomUUID()}` };
    const before = await scrape(api());

    const created = await client.createOrder(key, { sku: 'OBS-1', quantity: 1 }, { 'X-Request-Id': ids.create });
    const replayed = await client.createOrder(key, { sku: 'OBS-1', quantity: 1 }, { 'X-Request-Id': ids.replay });
    const conflict = await client.createOrder(key, { sku: 'OBS-1', quantity: 2 }, { 'X-Request-Id': ids.conflict });
    expect([created.status, replayed.status, replayed.headers['idempotent-replayed'], conflict.status]).toEqual([201, 201, 'true', 422]);

    const after = await scrape(api());
    const [was, now] = [outcomes(before.text), outcomes(after.text)];
    expect(Object.fromEntries(Object.keys(now).map((outcome) => [outcome, now[outcome] - was[outcome]]))).toEqual({
      created: 1,
      replayed: 1,
      're-executed': 0,
      conflict: 1,
      'in-progress': 0,
    });
    const requests = (text: string, status: string) =>
      sample(text, 'http_request_duration_seconds_count', { method: 'POST', route: '/v1/orders', status_code: status });
    const increase = (status: string) => requests(after.text, status) - requests(before.text, status);
    expect([increase('201'), increase('422')]).toEqual([2, 1]);

    const { rows } = await orders.pool.query('SELECT id FROM outbox_messages WHERE tenant_id = $1', [tenantId]);
    expect(rows).toHaveLength(1);
    const expected = { tenant: tenantId, operation: 'orders.create' };
    expect(await logLine(api(), completed(ids.create))).toMatchObject({
      ...expected,
      idempotencyOutcome: 'created',
      messageIds: [rows[0].id],
      res: { statusCode: 201 },
    });
    const replayLine = await logLine(api(), completed(ids.replay));
    expect(replayLine).toMatchObject({ ...expected, idempotencyOutcome: 'replayed', res: { statusCode: 201 } });
    expect(replayLine).not.toHaveProperty('messageIds');
    expect(await logLine(api(), completed(ids.conflict))).toMatchObject({
      ...expected,
      idempotencyOutcome: 'conflict',
      res: { statusCode: 422 },
    });
    expect((await logLine(api(), completed(ids.create))).req.headers.authorization).toBe('[Redacted]');
    expect(api().output()).not.toContain(apiKey);
  });

  it('echoes a well-formed X-Request-Id and logs it; replaces anything else with a generated one', async () => {
    const { apiKey } = await orders.tenant();
    const client = new ApiClientSession(api().url, apiKey);
    const mine = `trace.${randomUUID()}:1`;
    const generated = await client.get(`/v1/orders/${randomUUID()}`);
    expect(generated.headers['x-request-id']).toMatch(UUID);
    expect(await logLine(api(), completed(generated.headers['x-request-id'] as string))).toMatchObject({ res: { statusCode: 404 } });

    const kept = await http(`${api().url}/v1/orders/${randomUUID()}`, {
      headers: { Authorization: `Bearer ${apiKey}`, 'X-Request-Id': mine },
    });
    expect([kept.status, kept.headers['x-request-id']]).toEqual([404, mine]);
    expect(await logLine(api(), completed(mine))).toMatchObject({ operation: 'orders.read', res: { statusCode: 404 } });

    for (const bad of ['has spaces in it', 'x'.repeat(129), 'semi;colon']) {
      const replaced = await http(`${api().url}/v1/orders`, { method: 'POST', headers: { 'X-Request-Id': bad }, body: {} });
      expect(replaced.status).toBe(401);
      expect(replaced.headers['x-request-id']).toMatch(UUID);
      // The refused request is logged under the id it was answered with, with the operation it tried.
      expect(await logLine(api(), completed(replaced.headers['x-request-id'] as string))).toMatchObject({
        operation: 'orders.create',
        res: { statusCode: 401 },
      });
    }
    expect(logLines(api()).filter((line) => line.requestId === 'has spaces in it')).toEqual([]);
  });

  it("the relay logs its batches and each consumer logs the command's message with its id, type and outcome", async () => {
    const { tenantId, apiKey } = await orders.tenant();
    const created = await new ApiClientSession(api().url, apiKey).createOrder(`obs-${randomUUID()}`, { sku: 'OBS-2', quantity: 1 });
    expect(created.status).toBe(201);
    const { messageIds } = await logLine(api(), (line) => line.tenant === tenantId && line.idempotencyOutcome === 'created');
    const [messageId] = messageIds;

    await fulfillmentDb.until(
      () => fulfillmentDb.inbox(messageId),
      (rows) => rows.length === 1,
      90_000,
    );
    await notifierDb.until(
      () => notifierDb.delivery(messageId),
      (rows) => rows.length === 1,
      90_000,
    );
    for (const consumer of ['fulfillment', 'notifier']) {
      const processed = await logLine(apps[consumer], (line) => line.messageId === messageId && line.msg === 'message processed');
      expect(processed).toMatchObject({
        consumer,
        messageId,
        eventType: 'OrderPlaced',
        outcome: 'applied',
        topic: expect.any(String),
        partition: expect.any(Number),
        offset: expect.any(String),
      });
      expect(sample((await scrape(apps[consumer])).text, `${consumer}_messages_total`, { outcome: 'applied' })).toBeGreaterThanOrEqual(1);
    }
    const batch = await logLine(apps['outbox-relay'], (line) => line.msg === 'outbox batch published');
    expect(batch).toMatchObject({ claimed: expect.any(Number), published: expect.any(Number), parked: 0, durationMs: expect.any(Number) });
    expect(batch.published).toBeGreaterThanOrEqual(1);
    const relayMetrics = (await scrape(apps['outbox-relay'])).text;
    expect(sample(relayMetrics, 'outbox_published_total')).toBeGreaterThanOrEqual(1);
    expect(sample(relayMetrics, 'outbox_claim_duration_seconds_count')).toBeGreaterThanOrEqual(1);
  });

  it('counts 503s for an unreachable database by route, apart from idempotency outcomes', async () => {
    const { apiKey } = await orders.tenant();
    const client = new ApiClientSession(api().url, apiKey);
    const unavailable = (text: string, method: string, route: string) =>
      sample(text, 'http_database_unavailable_responses_total', { method, route });
    const before = (await scrape(api())).text;
    await proxy.cut();
    try {
      expect((await client.createOrder(`obs-${randomUUID()}`, { sku: 'OBS-3', quantity: 1 })).status).toBe(503);
      expect((await client.get(`/v1/orders/${randomUUID()}`)).status).toBe(503);
    } finally {
      await proxy.restore();
    }
    const after = (await scrape(api())).text;
    expect([
      unavailable(after, 'POST', '/v1/orders') - unavailable(before, 'POST', '/v1/orders'),
      unavailable(after, 'GET', '/v1/orders/:id') - unavailable(before, 'GET', '/v1/orders/:id'),
    ]).toEqual([1, 1]);
    expect(outcomes(after)).toEqual(outcomes(before));
  });
});
