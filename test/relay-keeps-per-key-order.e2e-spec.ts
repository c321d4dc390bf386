import { randomUUID } from 'node:crypto';
import { Headers } from '@app/contracts';
import { RunningApp, startApp } from './support/apps';
import { ensureServiceTopics, testKafka } from './support/kafka';
import { OutboxDb } from './support/outbox-db';
import { ReadMessage, TopicReader } from './support/topic-reader';

const KEYS = 100;

/** Per key, the `n` of each message in the order the topic holds them. */
function sequencesByKey(messages: ReadMessage[]): Map<string, number[]> {
  const byKey = new Map<string, number[]>();
  for (const m of messages) byKey.set(m.key, [...(byKey.get(m.key) ?? []), m.value.n]);
  return byKey;
}

/** The first time each n appears, per key, must be 1, 2, 3, …: a duplicate may repeat an earlier one, never skip ahead. */
function expectFirstOccurrencesInOrder(byKey: Map<string, number[]>, perKey: number) {
  for (const [key, ns] of byKey) {
    const firsts = ns.filter((n, i) => ns.indexOf(n) === i);
    expect({ key, firsts }).toEqual({ key, firsts: Array.from({ length: perKey }, (_, i) => i + 1) });
  }
}

describe('several relay instances', () => {
  let outbox: OutboxDb;
  const relays: RunningApp[] = [];
  const kafka = testKafka('relay-order');

  beforeAll(async () => {
    outbox = await new OutboxDb().init();
    // The readers subscribe before any relay (which would create the topic) has started.
    await ensureServiceTopics(kafka);
  });
  afterEach(async () => {
    await Promise.all(relays.splice(0).map((relay) => relay.stop('SIGKILL')));
  });
  afterAll(() => outbox.close());

  async function relay() {
    const started = await startApp('outbox-relay', { RELAY_HEARTBEAT_MS: '300', RELAY_BATCH_SIZE: '200', RELAY_POLL_INTERVAL_MS: '100' });
    relays.push(started);
    return started;
  }

  /** Events `from` to `to` of each of KEYS keys, interleaved, written by the real writer in transactions of `rows`. */
  async function writeEvents(tenantId: string, to: number, { from = 1, rows = 100 } = {}): Promise<void> {
    const events: [string, number][] = [];
    for (let n = from; n <= to; n++) for (let k = 0; k < KEYS; k++) events.push([`key-${k}`, n]);
    for (let i = 0; i < events.length; i += rows) await outbox.commit(tenantId, events.slice(i, i + rows));
  }

  it('3 instances, 10,000 events over 100 keys: every event arrives and each key keeps its order', async () => {
    const tenantId = `t-${randomUUID().slice(0, 12)}`;
    const read = new TopicReader(kafka, tenantId);
    await read.start();
    try {
      const writing = writeEvents(tenantId, 100);
      await Promise.all([relay(), relay(), relay()]);
      await writing;

      const messages = await read.until((m) => new Set(m.map((x) => x.headers[Headers.messageId])).size >= 10_000, 120_000);
      const byKey = sequencesByKey(messages);
      expect(byKey.size).toBe(KEYS);
      expectFirstOccurrencesInOrder(byKey, 100);
      // With no crash there is nothing to republish: each message exactly once.
      expect(messages).toHaveLength(10_000);

      const rows = await outbox.dataSource.query(
        `SELECT instance_id, shards FROM outbox_relay_instances WHERE heartbeat_at > now() - interval '1 second'`,
      );
      const owned = rows.flatMap((r: { shards: number[] }) => r.shards);
      expect(owned.sort((a: number, b: number) => a - b)).toEqual(Array.from({ length: 16 }, (_, i) => i));
      expect(rows.filter((r: { shards: number[] }) => r.shards.length > 0).length).toBe(3);
    } finally {
      await read.stop();
    }
  }, 180_000); // the topic is read for up to 120 s

  it('SIGKILL in the middle of batches, again and again: every event arrives; duplicates keep their message-id', async () => {
    const tenantId = `t-${randomUUID().slice(0, 12)}`;
    const read = new TopicReader(kafka, tenantId);
    await read.start();
    try {
      // Each victim gets a backlog of 15 events per key (1,500 rows, one commit) and is killed while it drains it.
      let killedWithRowsWaiting = 0;
      for (let round = 0; round < 4; round++) {
        const victim = await relay();
        await writeEvents(tenantId, 15 * (round + 1), { from: 15 * round + 1, rows: 1_500 });
        await new Promise((resolve) => setTimeout(resolve, Math.floor(Math.random() * 60)));
        const waiting = await outbox.unpublished(tenantId);
        await victim.stop('SIGKILL');
        if (waiting > 0) killedWithRowsWaiting++;
        relays.splice(relays.indexOf(victim), 1);
      }
      await relay();
      // The kills struck a relay with work to do, not only idle ones.
      expect(killedWithRowsWaiting).toBeGreaterThan(0);
      const expected = new Set(
        (await outbox.dataSource.query('SELECT id FROM outbox_messages WHERE tenant_id = $1', [tenantId])).map((r: { id: string }) => r.id),
      );

      const messages = await read.until((m) => new Set(m.map((x) => x.headers[Headers.messageId])).size >= expected.size, 120_000);
      expect(new Set(messages.map((m) => m.headers[Headers.messageId]))).toEqual(expected);
      // A duplicate is a whole message again: same id, same key, same payload.
      const first = new Map<string, ReadMessage>();
      for (const m of messages) {
        const id = m.headers[Headers.messageId];
        if (first.has(id)) expect({ key: m.key, value: m.value }).toEqual({ key: first.get(id)!.key, value: first.get(id)!.value });
        else first.set(id, m);
      }
      expectFirstOccurrencesInOrder(sequencesByKey(messages), 60);
    } finally {
      await read.stop();
    }
  }, 180_000);
});
