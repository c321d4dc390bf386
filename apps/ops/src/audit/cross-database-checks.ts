import { EntityManager } from 'typeorm';
import { Topics } from '@app/contracts';
import { DeclaredRetention } from '@app/inbox';
import { queryRows } from '@app/platform';
import { CliError } from '../cli-error';
import { ConsumerDatabase } from '../consumer-databases';
import { progress } from '../progress';
import { CheckResult, Mismatch } from './audit-report';

/**
 * Ids cross from one database to the other in chunks of this many: memory stays bounded by the
 * chunk (plus `--limit` examples), whatever the table sizes.
 */
const CHUNK = 5_000;

/**
 * Both windows end this far inside a retention: rows near its edge may be deleted by a sweep while
 * the audit reads them, and two database servers' clocks may disagree by a little.
 */
export const EDGE_SECONDS = 60;

export interface CrossDatabaseOptions {
  limit: number;
  graceSeconds: number;
  outboxRetentionSeconds: number;
  json?: boolean;
}

export interface ConsumerInbox {
  database: ConsumerDatabase;
  consumers: DeclaredRetention[];
}

/** Runs `work` against one database; a failure becomes one line naming that database. */
export async function onDatabase<T>(database: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof CliError) throw error;
    throw new CliError(`the ${database} database failed a query: ${(error as Error).message}`);
  }
}

export async function queryOn<T = any>(database: string, manager: EntityManager, sql: string, parameters: unknown[] = []): Promise<T[]> {
  return onDatabase(database, async () => (await queryRows<T>(manager, sql, parameters)).rows);
}

function collector(name: string, limit: number): CheckResult & { add(mismatch: Mismatch): void } {
  const result = { name, checked: 0, mismatches: 0, examples: [] as Mismatch[] };
  return Object.assign(result, {
    add(mismatch: Mismatch) {
      result.mismatches++;
      if (result.examples.length < limit) result.examples.push(mismatch);
    },
  });
}

function finish({ name, checked, mismatches, examples }: CheckResult, hint: string): CheckResult {
  return { name, checked, mismatches, examples, ...(mismatches ? { hint } : {}) };
}

/**
 * Every event published inside a consumer's memory (its declared inbox retention, bounded by the
 * outbox retention) and more than `graceSeconds` ago is in that consumer's inbox, with any outcome,
 * or in its dead letters. Walks the outbox by sequence, one chunk at a time, asking each consumer
 * database which of the chunk's ids it knows.
 */
export async function publishedEventsReachedConsumers(
  orders: EntityManager,
  inboxes: ConsumerInbox[],
  options: CrossDatabaseOptions,
): Promise<CheckResult> {
  const check = collector('published-events-reached-consumers', options.limit);
  const [{ now }] = await queryOn<{ now: Date }>('orders', orders, /* sql */ `SELECT now() AS now`);
  const since = (retentionSeconds: number) =>
    new Date(now.getTime() - Math.max(0, Math.min(retentionSeconds, options.outboxRetentionSeconds) - EDGE_SECONDS) * 1000);
  const until = new Date(now.getTime() - options.graceSeconds * 1000);
  const consumers = inboxes.flatMap(({ database, consumers }) =>
    consumers.map(({ consumer, retentionSeconds }) => ({ database, consumer, since: since(retentionSeconds) })),
  );
  const oldest = new Date(Math.min(since(options.outboxRetentionSeconds).getTime(), ...consumers.map((c) => c.since.getTime())));

  const window = /* sql */ `published_at > $1 AND published_at <= $2 AND topic = $3`;
  const [{ total }] = await queryOn<{ total: number }>(
    'orders',
    orders,
    /* sql */ `SELECT count(*)::int AS total FROM outbox_messages WHERE ${window}`,
    [oldest, until, Topics.orderEvents],
  );
  for (const { database, consumers } of inboxes) {
    if (!consumers.length && total) {
      check.add({
        problem: 'the database declares no consumer (inbox_consumers is empty): no published event can be confirmed there',
        database: database.name,
      });
    }
  }

  const bar = progress('published events -> consumers', total, options);
  try {
    for (let after = '0'; ;) {
      const rows = await queryOn<{ id: string; sequence: string; event_type: string; tenant_id: string; published_at: Date }>(
        'orders',
        orders,
        /* sql */ `
        SELECT id, sequence, event_type, tenant_id, published_at FROM outbox_messages
        WHERE sequence > $4 AND ${window}
        ORDER BY sequence LIMIT $5`,
        [oldest, until, Topics.orderEvents, after, CHUNK],
      );
      for (const { database, consumer, since } of consumers) {
        const mine = rows.filter((row) => row.published_at > since);
        if (!mine.length) continue;
        check.checked += mine.length;
        // Asks which ids the consumer has (a plain index lookup per id), not which it lacks: an anti-join
        // against the whole inbox would rescan it once per chunk.
        const known = await queryOn<{ id: string }>(
          database.name,
          database.manager,
          /* sql */ `
          SELECT message_id AS id FROM inbox_messages WHERE consumer = $1 AND message_id = ANY($2::uuid[])
          UNION
          SELECT message_id FROM dead_letters WHERE consumer = $1 AND message_id = ANY($2::uuid[])`,
          [consumer, mine.map((row) => row.id)],
        );
        const ids = new Set(known.map((row) => row.id));
        for (const row of mine.filter((row) => !ids.has(row.id))) {
          check.add({
            problem: `published event is neither in the ${consumer} inbox nor in its dead letters`,
            database: database.name,
            consumer,
            messageId: row.id,
            event: row.event_type,
            tenant: row.tenant_id,
            publishedAt: row.published_at.toISOString(),
          });
        }
      }
      bar.increment(rows.length);
      if (rows.length < CHUNK) break;
      after = rows[rows.length - 1].sequence;
    }
  } finally {
    bar.stop();
  }
  return finish(
    check,
    'The relay published these events longer ago than --grace-seconds, yet the consumer has no record of them: it is down or ' +
      'lagging, its offsets were moved past them, or its database was restored from an older backup (then it will not see them again ' +
      'unless they are replayed). See docs/audit.md.',
  );
}

/**
 * Every inbox entry a consumer received inside the outbox retention refers to an outbox row the
 * orders database still has. Walks each inbox by primary key, one chunk at a time, asking the
 * orders database which of the chunk's message-ids it still has.
 */
export async function inboxEntriesHaveOutboxRows(
  orders: EntityManager,
  databases: ConsumerDatabase[],
  options: CrossDatabaseOptions,
): Promise<CheckResult> {
  const check = collector('consumer-inbox-entries-have-outbox-rows', options.limit);
  const windowSeconds = Math.max(0, options.outboxRetentionSeconds - EDGE_SECONDS);
  const windows: { database: ConsumerDatabase; since: Date; total: number }[] = [];
  for (const database of databases) {
    const [{ since, total }] = await queryOn<{ since: Date; total: number }>(
      database.name,
      database.manager,
      /* sql */ `
      SELECT now() - make_interval(secs => $1) AS since,
             (SELECT count(*)::int FROM inbox_messages WHERE received_at > now() - make_interval(secs => $1)) AS total`,
      [windowSeconds],
    );
    windows.push({ database, since, total });
  }

  const bar = progress(
    'inbox entries -> outbox',
    windows.reduce((sum, w) => sum + w.total, 0),
    options,
  );
  try {
    for (const { database, since } of windows) {
      for (let after = ['', '00000000-0000-0000-0000-000000000000']; ;) {
        const rows = await queryOn<{ consumer: string; message_id: string; event_type: string | null; outcome: string; received_at: Date }>(
          database.name,
          database.manager,
          /* sql */ `
          SELECT consumer, message_id, event_type, outcome, received_at FROM inbox_messages
          WHERE (consumer, message_id) > ($1, $2::uuid) AND received_at > $3
          ORDER BY consumer, message_id LIMIT $4`,
          [...after, since, CHUNK],
        );
        if (!rows.length) break;
        check.checked += rows.length;
        const known = await queryOn<{ id: string }>(
          'orders',
          orders,
          /* sql */ `SELECT id FROM outbox_messages WHERE id = ANY($1::uuid[])`,
          [[...new Set(rows.map((row) => row.message_id))]],
        );
        const ids = new Set(known.map((row) => row.id));
        for (const row of rows.filter((row) => !ids.has(row.message_id))) {
          check.add({
            problem: 'consumer remembers an event the orders database does not have',
            database: database.name,
            consumer: row.consumer,
            messageId: row.message_id,
            event: row.event_type,
            outcome: row.outcome,
            receivedAt: row.received_at.toISOString(),
          });
        }
        bar.increment(rows.length);
        if (rows.length < CHUNK) break;
        const last = rows[rows.length - 1];
        after = [last.consumer, last.message_id];
      }
    }
  } finally {
    bar.stop();
  }
  return finish(
    check,
    'The consumers acted on events (shipments, webhooks) that the orders database has forgotten: typically it was restored from an ' +
      'OLDER backup. The orders, outbox rows and idempotency receipts of that window are gone, so a client retrying one of those ' +
      'commands with the same Idempotency-Key would execute it again. Keep the API closed to retries of the lost window, or restore ' +
      'the receipts too: see docs/audit.md.',
  );
}
