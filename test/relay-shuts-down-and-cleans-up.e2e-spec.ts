import { randomUUID } from 'node:crypto';
import { startApp } from './support/apps';
import { OutboxDb } from './support/outbox-db';
import { eventually } from './support/eventually';

const RELAY_LOCK_CLASS = 0x0b0c;

describe('relay housekeeping', () => {
  let outbox: OutboxDb;

  beforeAll(async () => {
    outbox = await new OutboxDb().init();
  });
  afterAll(() => outbox.close());

  it('on SIGTERM finishes its batch, releases every shard lock and leaves the instance list', async () => {
    const instances = async (): Promise<string[]> =>
      (await outbox.dataSource.query('SELECT instance_id FROM outbox_relay_instances')).map((r: { instance_id: string }) => r.instance_id);
    const before = await instances();
    const relay = await startApp('outbox-relay', { RELAY_HEARTBEAT_MS: '200' });
    const locks = () =>
      outbox.dataSource.query(
        `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND classid = $1 AND granted
           AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
        [RELAY_LOCK_CLASS],
      );
    await eventually(locks, (rows) => rows[0].n === 16, { timeoutMs: 5_000, what: 'the relay holding all 16 shard locks' });

    const tenantId = `t-${randomUUID().slice(0, 12)}`;
    await outbox.commit(
      tenantId,
      Array.from({ length: 500 }, (_, i) => [`k-${i % 10}`, i] as [string, number]),
    );
    const exit = await relay.stop('SIGTERM');
    expect(relay.output()).not.toMatch(/producer is disconnected|"level":50/);

    expect(exit.signal === 'SIGTERM' || exit.code === 0).toBe(true);
    expect((await locks())[0].n).toBe(0);
    expect((await instances()).filter((id) => !before.includes(id))).toEqual([]);
    // Whatever it had claimed was either published and marked, or left for the next relay: never half-marked.
    const [{ unpublished, published }] = await outbox.dataSource.query(
      `SELECT count(*) FILTER (WHERE published_at IS NULL)::int AS unpublished,
              count(*) FILTER (WHERE published_at IS NOT NULL)::int AS published
       FROM outbox_messages WHERE tenant_id = $1`,
      [tenantId],
    );
    expect(unpublished + published).toBe(500);
  });

  it('deletes published rows past OUTBOX_RETENTION_SECONDS in batches, and nothing unpublished or recent', async () => {
    const tenantId = `t-${randomUUID().slice(0, 12)}`;
    const [old1, old2, old3, recent, pending] = await outbox.commit(
      tenantId,
      [1, 2, 3, 4, 5].map((n) => ['k', n] as [string, number]),
    );
    await outbox.dataSource.query(`UPDATE outbox_messages SET published_at = now() - interval '2 hours' WHERE id = ANY($1::uuid[])`, [
      [old1, old2, old3],
    ]);
    await outbox.dataSource.query(`UPDATE outbox_messages SET published_at = now() WHERE id = $1`, [recent]);
    // A row the relay must still publish, even though it is old.
    await outbox.dataSource.query(`UPDATE outbox_messages SET created_at = now() - interval '3 hours', parked_at = now() WHERE id = $1`, [
      pending,
    ]);

    const relay = await startApp('outbox-relay', { OUTBOX_RETENTION_SECONDS: '3600', OUTBOX_CLEANUP_INTERVAL_SECONDS: '1' });
    try {
      const remaining = async () =>
        (await outbox.dataSource.query('SELECT id FROM outbox_messages WHERE tenant_id = $1 ORDER BY sequence', [tenantId])).map(
          (r: { id: string }) => r.id,
        );
      await eventually(remaining, (ids) => ids.length <= 2, { timeoutMs: 5_000, what: 'the cleanup deleting the old published rows' });
      expect(await remaining()).toEqual([recent, pending]);
    } finally {
      await relay.stop();
    }
  });
});
