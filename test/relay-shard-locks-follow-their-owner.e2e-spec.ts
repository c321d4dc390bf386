import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { Headers } from '@app/contracts';
import { RunningApp, startApp } from './support/apps';
import { ensureServiceTopics, testKafka } from './support/kafka';
import { OutboxDb } from './support/outbox-db';
import { sample, scrape } from './support/observe';
import { privateDatabases } from './support/private-stack';
import { LONG_RUN, searchTimeout } from './support/search';
import { TopicReader } from './support/topic-reader';

const SHARDS = 16;
const RELAY_LOCK_CLASS = 0x0b0c;

/**
 * Real PostgreSQL errors at random moments of the relays' own statements (heartbeat, rebalance, marking
 * rows published), while the connection stays open: the SQLSTATEs that count as "database trouble"
 * (statement timeout, deadlock, disk full, out of memory). Installed in this suite's private database only.
 */
const INSTALL_FAULTS = /* sql */ `
  CREATE TABLE relay_faults (probability float8 NOT NULL);
  INSERT INTO relay_faults VALUES (0);
  CREATE FUNCTION inject_relay_fault() RETURNS trigger LANGUAGE plpgsql AS $$
  DECLARE
    codes text[] := ARRAY['57014', '40P01', '53100', '53200'];
  BEGIN
    IF current_setting('application_name') = 'outbox-relay' AND random() < (SELECT probability FROM relay_faults) THEN
      RAISE EXCEPTION 'injected relay fault' USING ERRCODE = codes[1 + floor(random() * 4)::int];
    END IF;
    RETURN NULL;
  END $$;
  CREATE TRIGGER relay_fault_heartbeat AFTER INSERT OR UPDATE ON outbox_relay_instances
    FOR EACH STATEMENT EXECUTE FUNCTION inject_relay_fault();
  CREATE TRIGGER relay_fault_mark AFTER UPDATE ON outbox_messages
    FOR EACH STATEMENT EXECUTE FUNCTION inject_relay_fault();`;

interface LockView {
  /** Per backend holding relay shard locks: the shards it holds. */
  holders: number[][];
  /** Per live instance (recent heartbeat) that announces shards: the shards it announces. */
  announced: number[][];
}

async function lockView(db: DataSource): Promise<LockView> {
  const holders = await db.query(
    /* sql */ `
    SELECT pid, array_agg(objid::int ORDER BY objid) AS shards FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND classid = $1 AND objsubid = 2 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
    GROUP BY pid`,
    [RELAY_LOCK_CLASS],
  );
  const announced = await db.query(
    /* sql */ `SELECT shards FROM outbox_relay_instances WHERE heartbeat_at > now() - interval '2 seconds' AND cardinality(shards) > 0`,
  );
  const sorted = (sets: number[][]) => sets.map((s) => [...s].sort((a, b) => a - b)).sort((a, b) => a[0] - b[0]);
  return {
    holders: sorted(holders.map((h: { shards: number[] }) => h.shards)),
    announced: sorted(announced.map((a: { shards: number[] }) => a.shards)),
  };
}

/** Every shard locked by exactly one backend, and each backend's locks are exactly what one live instance announces. */
function consistent(view: LockView): boolean {
  const all = view.holders.flat().sort((a, b) => a - b);
  return (
    JSON.stringify(all) === JSON.stringify(Array.from({ length: SHARDS }, (_, i) => i)) &&
    JSON.stringify(view.holders) === JSON.stringify(view.announced)
  );
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('relay shard locks never outlive the ownership of the instance that took them', () => {
  const kafka = testKafka('relay-locks');
  const relays: RunningApp[] = [];
  let outbox: OutboxDb;
  let env: Record<string, string>;

  beforeAll(async () => {
    const dbs = await privateDatabases('relaylocks');
    env = { ORDERS_DATABASE_URL: dbs.ordersUrl };
    outbox = await new OutboxDb(dbs.ordersUrl).init();
    await outbox.dataSource.query(INSTALL_FAULTS);
    await ensureServiceTopics(kafka);
  });
  afterAll(async () => {
    await Promise.all(relays.splice(0).map((relay) => relay.stop('SIGKILL')));
    await outbox?.close();
  });

  async function relay(): Promise<RunningApp> {
    const started = await startApp('outbox-relay', {
      ...env,
      RELAY_SHARDS: String(SHARDS),
      RELAY_HEARTBEAT_MS: '200',
      RELAY_POLL_INTERVAL_MS: '100',
      RELAY_BATCH_SIZE: '50',
      RELAY_BACKOFF_MIN_MS: '20',
      RELAY_BACKOFF_MAX_MS: '300',
    });
    relays.push(started);
    return started;
  }

  it(
    'errors while the connection stays open and killed sessions, with 2 then 3 instances: one live owner per shard, every row published',
    async () => {
      const tenantId = `t-${randomUUID().slice(0, 12)}`;
      const read = new TopicReader(kafka, tenantId);
      await read.start();
      try {
        await Promise.all([relay(), relay()]);
        await outbox.dataSource.query('UPDATE relay_faults SET probability = 0.2');

        let writing = true;
        let written = 0;
        const writer = (async () => {
          for (let round = 0; writing; round++) {
            const events: [string, number][] = Array.from({ length: 10 }, (_, i) => [`key-${(round * 10 + i) % 97}`, round]);
            await outbox.commit(tenantId, events);
            written += events.length;
            await pause(40);
          }
        })();
        const chaos = async (ms: number) => {
          for (const end = Date.now() + ms; Date.now() < end;) {
            await pause(150 + Math.floor(Math.random() * 350));
            await outbox.dataSource.query(/* sql */ `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = current_database() AND application_name = 'outbox-relay' AND random() < 0.2`);
          }
        };
        const phase = LONG_RUN ? 60_000 : 5_000;
        await chaos(phase);
        await relay(); // a third instance joins: shards move while the faults go on
        await chaos(phase);

        await outbox.dataSource.query('UPDATE relay_faults SET probability = 0');
        writing = false;
        // The faults really hit the relays: each recovered from database trouble more than once.
        for (const r of relays)
          expect(sample((await scrape(r)).text, 'outbox_publish_failures_total', { cause: 'database' })).toBeGreaterThan(1);
        await writer;

        const deadline = Date.now() + 30_000;
        let view: LockView = { holders: [], announced: [] };
        let unpublished = -1;
        while (Date.now() < deadline) {
          unpublished = await outbox.unpublished(tenantId);
          view = await lockView(outbox.dataSource);
          // The three instances are all live again: a session killed by the last fault rejoins within a heartbeat or two.
          if (unpublished === 0 && consistent(view) && view.holders.length === 3) break;
          await pause(200);
        }
        expect({ unpublished, ...view }).toEqual({ unpublished: 0, holders: view.announced, announced: view.announced });
        expect(view.holders.flat().sort((a, b) => a - b)).toEqual(Array.from({ length: SHARDS }, (_, i) => i));
        expect(view.holders).toHaveLength(3);
        // Each lost or failed session went back to the pool once, destroyed: never a double release.
        for (const r of relays) expect(r.output()).not.toMatch(/already been released|closing the relay session failed/);

        const ids = (await outbox.dataSource.query('SELECT id FROM outbox_messages WHERE tenant_id = $1', [tenantId])).map(
          (r: { id: string }) => r.id,
        );
        expect(ids).toHaveLength(written);
        const messages = await read.until((m) => new Set(m.map((x) => x.headers[Headers.messageId])).size >= ids.length, 60_000);
        expect(new Set(messages.map((m) => m.headers[Headers.messageId]))).toEqual(new Set(ids));
      } finally {
        await read.stop();
      }
    },
    searchTimeout(180_000),
  );
});
