import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { Client } from 'pg';
import { Headers } from '@app/contracts';
import { RunningApp, startApp } from './support/apps';
import { eventually } from './support/eventually';
import { ensureServiceTopics, testKafka } from './support/kafka';
import { OutboxDb } from './support/outbox-db';
import { privateDatabases } from './support/private-stack';
import { firstCopiesByKey } from './support/relay-behind-a-fault-proxy';
import { sample, scrape } from './support/observe';
import { searchSettings, searchTimeout } from './support/search';
import { TopicReader } from './support/topic-reader';

const SHARDS = 16;
const RELAY_LOCK_CLASS = 0x0b0c;
const HEARTBEAT_MS = 200;
/** An instance silent for 3 heartbeats is gone (600 ms here): its shards must be published by another within this. */
const TAKEOVER_BOUND_MS = 5_000;
const KEYS = 97;

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A relay owns its shards by session-level advisory locks. One that stops answering while its
 * connection stays open — frozen (SIGSTOP, a long GC pause, a VM suspended), or cut off by a partition
 * TCP has not noticed — kept them: PostgreSQL releases them only when the session ends, which takes
 * minutes to hours of TCP timeouts, or never while the process is merely stopped. Its peers counted it
 * gone after three silent heartbeats, yet could not take one of its shards: the rows of half the keys
 * waited. Searched: which relay freezes, when, and for how long, while rows keep being committed; the
 * rows committed up to half a second into the freeze must be published by the other relay within a
 * bound, and after the frozen relay resumes, nothing is lost and each key's first copies are in order.
 */
describe('a relay that stops answering loses its shards to a live one', () => {
  const kafka = testKafka('relay-silent-owner');
  const relays: RunningApp[] = [];
  let outbox: OutboxDb;
  let env: Record<string, string>;

  beforeAll(async () => {
    const dbs = await privateDatabases('silentowner');
    env = { ORDERS_DATABASE_URL: dbs.ordersUrl };
    outbox = await new OutboxDb(dbs.ordersUrl).init();
    await ensureServiceTopics(kafka);
    relays.push(...(await Promise.all([relay(), relay()])));
  }, 120_000);
  afterAll(async () => {
    await Promise.all(relays.splice(0).map((r) => r.stop('SIGKILL')));
    await outbox?.close();
  });

  function relay(): Promise<RunningApp> {
    return startApp('outbox-relay', {
      ...env,
      RELAY_SHARDS: String(SHARDS),
      RELAY_HEARTBEAT_MS: String(HEARTBEAT_MS),
      RELAY_POLL_INTERVAL_MS: '100',
      RELAY_BATCH_SIZE: '50',
      RELAY_BACKOFF_MIN_MS: '20',
      RELAY_BACKOFF_MAX_MS: '300',
    });
  }

  /** The shards each backend holds, by backend. */
  async function holders(): Promise<number[][]> {
    const rows = await outbox.dataSource.query(
      /* sql */ `
      SELECT array_agg(objid::int ORDER BY objid) AS shards FROM pg_locks
      WHERE locktype = 'advisory' AND granted AND classid = $1 AND objsubid = 2
        AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
      GROUP BY pid`,
      [RELAY_LOCK_CLASS],
    );
    return rows.map((row: { shards: number[] }) => row.shards);
  }

  const twoOwners = () =>
    eventually(holders, (held) => held.length === 2 && held.flat().length === SHARDS, {
      timeoutMs: 30_000,
      what: 'both relays owning shards, every shard owned',
    });

  it(
    'its shards are published by the other within a bound; after it resumes nothing is lost and each key stays in order',
    async () => {
      await twoOwners();
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 0, max: 1 }),
          fc.integer({ min: 0, max: 1_000 }),
          fc.integer({ min: 0, max: 2_000 }),
          async (victim, freezeAfterMs, frozenLongerMs) => {
            const tenantId = `t-${randomUUID().slice(0, 12)}`;
            const read = new TopicReader(kafka, tenantId);
            await read.start();
            const events = new Map<string, { key: number; n: number }>();
            const committedAt: [id: string, at: number][] = [];
            const frozen = relays[victim].process;
            let writing = true;
            const writer = (async () => {
              for (let round = 0; writing; round++) {
                const batch: [string, number][] = Array.from({ length: 10 }, (_, i) => [`key-${(round * 10 + i) % KEYS}`, round]);
                const ids = await outbox.commit(tenantId, batch);
                ids.forEach((id, i) => events.set(id, { key: (round * 10 + i) % KEYS, n: round }));
                const at = Date.now();
                for (const id of ids) committedAt.push([id, at]);
                await pause(30);
              }
            })();
            const live = relays[1 - victim];
            const endedBefore = sample((await scrape(live)).text, 'outbox_relay_sessions_ended_total');
            try {
              await pause(freezeAfterMs);
              const frozeAt = Date.now();
              frozen.kill('SIGSTOP');
              try {
                await pause(500);
                const due = committedAt.filter(([, at]) => at <= frozeAt + 500).map(([id]) => id);
                await eventually(
                  async () =>
                    (
                      await outbox.dataSource.query(
                        'SELECT count(*)::int AS n FROM outbox_messages WHERE id = ANY($1::uuid[]) AND published_at IS NULL',
                        [due],
                      )
                    )[0].n as number,
                  (unpublished) => unpublished === 0,
                  {
                    timeoutMs: TAKEOVER_BOUND_MS,
                    what: `the ${due.length} rows committed up to 500 ms into relay ${victim}'s freeze published by the other (shards held: ${JSON.stringify(await holders())})`,
                  },
                );
                await pause(frozenLongerMs);
              } finally {
                frozen.kill('SIGCONT');
              }
              writing = false;
              await writer;
              const ids = [...events.keys()];
              const messages = await read.until((m) => new Set(m.map((x) => x.headers[Headers.messageId])).size >= ids.length, 60_000);
              expect(new Set(messages.map((m) => m.headers[Headers.messageId]))).toEqual(new Set(ids));
              expect(firstCopiesByKey(messages, events).disordered).toEqual([]);
              // The live relay moved them by ending the frozen one's session.
              expect(sample((await scrape(live)).text, 'outbox_relay_sessions_ended_total')).toBeGreaterThan(endedBefore);
              // The relay that froze takes its share again.
              await twoOwners();
            } finally {
              writing = false;
              await writer;
              await read.stop();
            }
          },
        ),
        searchSettings({ fast: 2, long: 12 }),
      );
    },
    searchTimeout(180_000),
  );

  /**
   * The other side of ending sessions: a gone instance's row may name a pid PostgreSQL has since given
   * to another session — a live relay's, or any other client's. Neither may be ended: only a pid no
   * live instance names, and only while it holds shard locks.
   */
  it("never ends a live relay's session or one holding no shard lock, whatever pid a gone instance names", async () => {
    await twoOwners();
    const bystander = new Client({ connectionString: env.ORDERS_DATABASE_URL });
    await bystander.connect();
    bystander.on('error', () => undefined);
    try {
      await bystander.query('SELECT pg_advisory_lock(42)'); // a lock of its own, not a relay's shard
      const [{ pid: bystanderPid }] = (await bystander.query('SELECT pg_backend_pid() AS pid')).rows;
      const live: { backend_pid: number }[] = await outbox.dataSource.query(
        `SELECT backend_pid FROM outbox_relay_instances WHERE heartbeat_at > now() - interval '1 second' AND backend_pid IS NOT NULL`,
      );
      expect(live).toHaveLength(2);
      const before = await holders();
      const endedBefore = await Promise.all(relays.map(async (r) => sample((await scrape(r)).text, 'outbox_relay_sessions_ended_total')));
      await outbox.dataSource.query(
        `INSERT INTO outbox_relay_instances (instance_id, heartbeat_at, backend_pid)
         VALUES ('e2e-gone-bystander', now() - interval '10 minutes', $1), ('e2e-gone-reused', now() - interval '10 minutes', $2)`,
        [bystanderPid, live[0].backend_pid],
      );
      await pause(10 * HEARTBEAT_MS);

      expect((await bystander.query('SELECT 1 AS alive')).rows).toEqual([{ alive: 1 }]);
      expect(await holders()).toEqual(before);
      const endedAfter = await Promise.all(relays.map(async (r) => sample((await scrape(r)).text, 'outbox_relay_sessions_ended_total')));
      expect(endedAfter).toEqual(endedBefore);
    } finally {
      await outbox.dataSource.query(`DELETE FROM outbox_relay_instances WHERE instance_id LIKE 'e2e-gone-%'`);
      await bystander.end().catch(() => undefined);
    }
  });
});
