import { randomUUID } from 'node:crypto';
import { Headers } from '@app/contracts';
import { RunningApp, startApp } from './support/apps';
import { testKafka } from './support/kafka';
import { OutboxDb } from './support/outbox-db';
import { messageIds, TopicReader } from './support/topic-reader';
import { eventually } from './support/eventually';

describe('the outbox relay', () => {
  let relay: RunningApp;
  let outbox: OutboxDb;
  const kafka = testKafka('relay-e2e');

  beforeAll(async () => {
    outbox = await new OutboxDb().init();
    relay = await startApp('outbox-relay', { RELAY_POLL_INTERVAL_MS: '200' });
  });
  afterAll(async () => {
    await relay.stop();
    await outbox.close();
  });

  async function reader(tenantId: string) {
    const r = new TopicReader(kafka, tenantId);
    await r.start();
    return r;
  }

  it('publishes every committed row with its headers and payload, and nothing of a rolled-back transaction', async () => {
    const tenantId = `t-${randomUUID().slice(0, 12)}`;
    const read = await reader(tenantId);
    try {
      const committed = await outbox.commit(tenantId, [
        ['order-1', 1],
        ['order-2', 1],
        ['order-1', 2],
      ]);
      await expect(
        outbox.dataSource.transaction(async (manager) => {
          await OutboxDb.add(manager, tenantId, [['order-3', 1]]);
          throw new Error('the command failed before commit');
        }),
      ).rejects.toThrow('the command failed');
      const afterRollback = await outbox.commit(tenantId, [['order-4', 1]]);

      // A sentinel on the rolled-back row's key, committed last: its key's shard and partition are the
      // rolled-back row's, so once it arrived a published rolled-back row would have arrived before it.
      // Only per key: rows of other keys may come later (another shard, another partition fetched later).
      const [sentinel] = await outbox.commit(tenantId, [['order-3', 2]]);
      const expected = [...committed, ...afterRollback];
      const everything = await read.until((m) => [...expected, sentinel].every((id) => messageIds(m).includes(id)));
      const messages = everything.filter((m) => m.headers[Headers.messageId] !== sentinel);
      expect(messageIds(messages).sort()).toEqual(expected.sort());
      expect(messages.some((m) => m.key === 'order-3')).toBe(false);

      const rows = await outbox.dataSource.query('SELECT id, created_at, headers FROM outbox_messages WHERE id = $1', [committed[0]]);
      const first = messages.find((m) => m.headers[Headers.messageId] === committed[0])!;
      expect(first.key).toBe('order-1');
      expect(first.value).toEqual({ key: 'order-1', n: 1 });
      expect(first.headers).toMatchObject({
        [Headers.messageId]: committed[0],
        [Headers.eventType]: 'RelayProbe',
        [Headers.eventVersion]: '1',
        [Headers.tenantId]: tenantId,
        [Headers.aggregateId]: 'order-1',
        [Headers.occurredAt]: rows[0].created_at.toISOString(),
        [Headers.traceparent]: rows[0].headers.traceparent,
      });
      const published = await outbox.dataSource.query(
        'SELECT count(*)::int AS n FROM outbox_messages WHERE tenant_id = $1 AND published_at IS NOT NULL',
        [tenantId],
      );
      expect(published[0].n).toBe(4 + 1); // the four committed rows and the sentinel
    } finally {
      await read.stop();
    }
  });

  it('publishes a row whose transaction took a lower sequence but committed after a later one', async () => {
    const tenantId = `t-${randomUUID().slice(0, 12)}`;
    const read = await reader(tenantId);
    const runner = outbox.dataSource.createQueryRunner();
    try {
      await runner.startTransaction();
      const [slow] = await OutboxDb.add(runner.manager, tenantId, [['slow', 1]]);
      const [fast] = await outbox.commit(tenantId, [['fast', 1]]);
      await read.until((m) => messageIds(m).includes(fast));
      await runner.commitTransaction();

      await read.until((m) => messageIds(m).includes(slow), 10_000);
      const [{ slow_seq, fast_seq }] = await outbox.dataSource.query(
        `SELECT (SELECT sequence FROM outbox_messages WHERE id = $1)::bigint AS slow_seq,
                (SELECT sequence FROM outbox_messages WHERE id = $2)::bigint AS fast_seq`,
        [slow, fast],
      );
      expect(BigInt(slow_seq)).toBeLessThan(BigInt(fast_seq));
    } finally {
      if (runner.isTransactionActive) await runner.rollbackTransaction();
      await runner.release();
      await read.stop();
    }
  });

  it('parks a message Kafka refuses (too large) without blocking other keys; later rows of its key wait', async () => {
    const tenantId = `t-${randomUUID().slice(0, 12)}`;
    const read = await reader(tenantId);
    try {
      const [huge] = await outbox.commit(tenantId, [['big', 1]], { filler: 'x'.repeat(2 * 1024 * 1024) });
      const [behindHuge] = await outbox.commit(tenantId, [['big', 2]]);
      const [other] = await outbox.commit(tenantId, [['small', 1]]);

      await read.until((m) => messageIds(m).includes(other));
      const parked: { parked_at: Date | null; last_error: string | null }[] = await eventually(
        () => outbox.dataSource.query('SELECT parked_at, last_error FROM outbox_messages WHERE id = $1', [huge]),
        (rows: { parked_at: Date | null }[]) => !!rows[0]?.parked_at,
        { timeoutMs: 10_000, what: 'the oversized row parked' },
      );
      expect(parked[0].last_error).toMatch(/MESSAGE_TOO_LARGE|RECORD_LIST_TOO_LARGE/);
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(messageIds(read.messages)).not.toContain(huge);
      expect(messageIds(read.messages)).not.toContain(behindHuge);
      const metrics = await (await fetch(`${relay.managementUrl}/metrics`)).text();
      expect(metrics).toMatch(/^outbox_parked_messages [1-9]/m);
      expect(metrics).toMatch(/^outbox_rejected_total [1-9]/m);
    } finally {
      await read.stop();
    }
  });
});
