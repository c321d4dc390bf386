import { randomUUID } from 'node:crypto';
import type { PoolClient } from 'pg';
import { DataSource } from 'typeorm';
import { claimBatch, lookAtFloor, markPublished, prepareRelaySession } from '@app/outbox';
import { DedicatedSession, inOneStatement, postgresPool } from '@app/platform';
import { notifierDatabase } from '../apps/notifier/src/database';
import { claimDue, settle } from '../apps/notifier/src/webhooks/delivery-store';
import { deliveredAtFirstAttempt, deliveriesOfTheirOwn } from './support/deliveries-of-their-own';
import { insertProbes, outboxOfItsOwn } from './support/outbox-of-its-own';

const RUNS = 40;

/**
 * How often each of the session's prepared statements was planned, from pg_prepared_statements (the
 * server's own count, whatever the machine's speed): one entry per statement whose text starts with one
 * of `starts`. PostgreSQL plans a prepared statement for the values at hand (a custom plan) on its
 * first five runs, then keeps doing so while that plan's estimated cost stays below the generic plan's;
 * more than five custom plans is a statement planned on every run.
 */
async function plansOf(client: PoolClient, starts: string[]) {
  const { rows } = await client.query<{ statement: string; generic_plans: number; custom_plans: number }>(/* sql */ `
    SELECT ltrim(regexp_replace(statement, '\\s+', ' ', 'g')) AS statement, generic_plans::int, custom_plans::int
    FROM pg_prepared_statements`);
  return starts.map((start) => {
    const counts = rows.find((row) => row.statement.startsWith(start));
    return { start, runs: counts ? counts.generic_plans + counts.custom_plans : 0, plannedOnEveryRun: !counts || counts.custom_plans > 5 };
  });
}

/**
 * At a trickle the queue sessions run their statements once per event or two. Each is prepared once per
 * session; PostgreSQL's own rule then planned some of them on every run: a statement over an array of
 * ids (`id = ANY($1)`, `unnest($1, …)`) has a custom plan that knows how many came, and looks cheaper
 * than the generic plan whenever few did. At 200 commands/s (`bench latency --notifier`,
 * pg_stat_statements) the relay's mark was planned 5,309 times in 35 s (0.06 ms each), more planning
 * than any other statement of the chain, and the notifier's settle in some runs 976 times (0.2 ms each).
 */
describe('the queue sessions at a trickle', () => {
  const outbox = outboxOfItsOwn('queueplans', async (dataSource) => {
    await insertProbes(dataSource, 100);
  });
  // Deliveries of the past, as a running notifier keeps them (the plans depend on the table's size).
  const deliveries = deliveriesOfTheirOwn('queueplans', async (dataSource) => {
    await dataSource.query(/* sql */ `
      INSERT INTO webhook_deliveries (message_id, tenant_id, order_id, url, event_type, payload, state, attempts, status_code, delivered_at)
      SELECT gen_random_uuid(), 't', gen_random_uuid(), 'http://127.0.0.1:1/hook', 'OrderPlaced', '{}', 'delivered', 1, 204, now()
      FROM generate_series(1, 5000)`);
  });

  it("plan each of the relay's statements once, not on every run", async () => {
    const session = await DedicatedSession.open(outbox());
    try {
      await prepareRelaySession(session.manager); // as the relay opens its session
      const client = session.connection;
      const shards = Array.from({ length: 16 }, (_, i) => i);
      let marked = 0;
      for (let run = 0; run < RUNS; run++) {
        // A look at the floor and a claim, then the mark, in one transaction: a row or two each.
        await client.query('BEGIN');
        await lookAtFloor(client, { shards, shardCount: 16, floor: 0n });
        const rows = await claimBatch(client, { shards, shardCount: 16, limit: 1 + (run % 2) });
        await markPublished(
          client,
          rows.map((row) => row.id),
        );
        await client.query('COMMIT');
        marked += rows.length;
      }
      expect(marked).toBe(60);
      const starts = ['SELECT pg_snapshot_xmin', 'WITH parked AS MATERIALIZED', 'UPDATE outbox_messages SET published_at'];
      expect(await plansOf(client, starts)).toEqual(starts.map((start) => ({ start, runs: RUNS, plannedOnEveryRun: false })));
    } finally {
      await session.close();
    }
  });

  it("plan each of the notifier dispatcher's statements once, not on every run", async () => {
    // One session, as each of the notifier's pooled sessions runs the dispatcher's statements.
    const url = (deliveries().options as { url: string }).url;
    const dataSource = await new DataSource(notifierDatabase({ url, poolSize: 1 })).initialize();
    try {
      let delivered = 0;
      for (let run = 0; run < RUNS; run++) {
        // A delivery is recorded, claimed and settled, as each event at a trickle is.
        await dataSource.query(/* sql */ `
          INSERT INTO webhook_deliveries (message_id, tenant_id, order_id, url, event_type, payload, state, next_attempt_at)
          VALUES (gen_random_uuid(), 't', gen_random_uuid(), 'http://127.0.0.1:1/hook', 'OrderPlaced', '{}', 'pending', now())`);
        const claimed = await inOneStatement(dataSource, (client) => claimDue(client, randomUUID(), 60_000, 64));
        delivered += await inOneStatement(dataSource, (client) => settle(client, deliveredAtFirstAttempt(claimed)));
      }
      expect(delivered).toBe(RUNS);
      const client = await postgresPool(dataSource).connect();
      try {
        const starts = ['UPDATE webhook_deliveries d SET lease_id', 'UPDATE webhook_deliveries d SET attempts'];
        expect(await plansOf(client, starts)).toEqual(starts.map((start) => ({ start, runs: RUNS, plannedOnEveryRun: false })));
      } finally {
        client.release();
      }
    } finally {
      await dataSource.destroy();
    }
  });
});
