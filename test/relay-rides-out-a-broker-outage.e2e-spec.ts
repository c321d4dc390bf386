import { Headers } from '@app/contracts';
import { createKafka } from '@app/platform';
import { ApiClientSession } from './support/command-api';
import { RunningApp, startApp } from './support/apps';
import { OrdersDb } from './support/orders-db';
import { TestBroker } from './support/test-broker';
import { TopicReader } from './support/topic-reader';
import { eventually } from './support/eventually';

async function metric(app: RunningApp, name: string): Promise<number> {
  const text = await (await fetch(`${app.managementUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return Number(line?.split(' ')[1] ?? NaN);
}

describe('a Kafka outage while commands keep arriving', () => {
  const broker = new TestBroker(19_192);
  const db = new OrdersDb();
  let api: RunningApp;
  let relay: RunningApp;

  beforeAll(async () => {
    await broker.start();
    api = await startApp('command-api', { KAFKA_BROKERS: broker.brokers });
    relay = await startApp('outbox-relay', {
      KAFKA_BROKERS: broker.brokers,
      RELAY_POLL_INTERVAL_MS: '100',
      RELAY_BACKOFF_MIN_MS: '100',
      RELAY_BACKOFF_MAX_MS: '1000',
    });
  }, 120_000);
  afterAll(async () => {
    await relay?.stop();
    await api?.stop();
    await broker.destroy();
    await db.close();
  });

  it('loses nothing: the backlog rises while the broker is down and drains when it returns', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(api.url, apiKey);
    const kafka = createKafka({ brokers: [broker.brokers], clientId: 'outage-e2e' });
    let n = 0;
    const place = async (count: number) => {
      for (let i = 0; i < count; i++) expect((await client.createOrder(`k-${n++}`, { sku: 'SKU-1', quantity: 1 })).status).toBe(201);
    };

    let read = new TopicReader(kafka, tenantId);
    await place(5);
    await read.start();
    await read.until((m) => m.length >= 5);
    await read.stop();
    const baseline = await metric(relay, 'outbox_backlog_messages');

    await broker.stop();
    await place(20); // the API keeps committing: it never needed Kafka
    await eventually(
      () => metric(relay, 'outbox_backlog_messages'),
      (backlog) => backlog >= baseline + 20,
      { timeoutMs: 5_000, what: 'the backlog metric counting the 20 new rows' },
    );
    // kafkajs gives up on the dead broker after its own short retries; then the relay reports it down.
    await eventually(
      () => metric(relay, 'outbox_relay_kafka_up'),
      (up) => up === 0,
      { what: 'outbox_relay_kafka_up 0' },
    );
    const ready = await fetch(`${relay.url}/health/ready`);
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as { unavailable: string[] }).unavailable).toEqual(['kafka']);
    const attempts = await db.pool.query(
      'SELECT max(attempts)::int AS max FROM outbox_messages WHERE tenant_id = $1 AND published_at IS NULL',
      [tenantId],
    );
    expect(attempts.rows[0].max).toBe(0); // outage attempts are not counted against a message

    await broker.start({ keepData: true });
    await place(5);
    const { rows } = await db.pool.query('SELECT id FROM outbox_messages WHERE tenant_id = $1', [tenantId]);
    expect(rows).toHaveLength(30);
    read = new TopicReader(kafka, tenantId);
    await read.start();
    try {
      const messages = await read.until((m) => new Set(m.map((x) => x.headers[Headers.messageId])).size >= 30, 60_000);
      expect(new Set(messages.map((m) => m.headers[Headers.messageId]))).toEqual(new Set(rows.map((r: { id: string }) => r.id)));
    } finally {
      await read.stop();
    }
    await eventually(
      () => metric(relay, 'outbox_backlog_messages'),
      (backlog) => backlog <= baseline,
      { timeoutMs: 5_000, what: 'the backlog metric back to its baseline' },
    );
    expect(await metric(relay, 'outbox_relay_kafka_up')).toBe(1);
  });
});
