import { EntityManager } from 'typeorm';
import { OrderEventTypes } from '@app/contracts';
import { queryRows } from '@app/platform';
import { duration } from '../output';
import { CheckResult, Note } from './audit-report';
import { EDGE_SECONDS } from './cross-database-checks';
import { judge } from './orders-checks';

/**
 * Every order event the notifier applied, inside its inbox retention, has its webhook delivery, and
 * that delivery is not dead. The consumer records both in one transaction, so a missing row means the
 * database lost it; delivered rows are swept no sooner than the inbox entries (delivered after they
 * were received, by the same retention). A pending delivery is not a mismatch: it is reported in a note.
 */
export async function appliedEventsHaveWebhookDeliveries(notifier: EntityManager, limit: number): Promise<CheckResult> {
  const judged = /* sql */ `
    SELECT i.message_id AS id, i.consumer, i.event_type, i.received_at AS at, d.tenant_id, d.order_id, d.attempts, d.status_code,
           d.last_error, d.dead_at,
           CASE
             WHEN d.message_id IS NULL THEN 'applied order event has no webhook delivery'
             WHEN d.state = 'dead' THEN 'webhook delivery is dead: given up, the receiver does not have it'
           END AS problem
    FROM inbox_messages i
    JOIN inbox_consumers c ON c.consumer = i.consumer
    LEFT JOIN webhook_deliveries d ON d.message_id = i.message_id
    WHERE i.outcome = 'applied' AND i.event_type IN ($1, $2)
      AND i.received_at > now() - make_interval(secs => greatest(c.retention_seconds - $3, 0))`;
  const result = await judge(
    notifier,
    'notifier-events-have-webhook-deliveries',
    judged,
    [OrderEventTypes.placed, OrderEventTypes.cancelled, EDGE_SECONDS],
    limit,
    (row) => ({
      problem: row.problem,
      database: 'notifier',
      consumer: row.consumer,
      messageId: row.id,
      event: row.event_type,
      tenant: row.tenant_id,
      order: row.order_id,
      attempts: row.attempts,
      statusCode: row.status_code,
      lastError: row.last_error,
      receivedAt: row.at.toISOString(),
      deadAt: row.dead_at?.toISOString() ?? null,
    }),
    'A dead delivery was given up (its retry schedule ran out, the receiver refused it with a 4xx, or an operator dead-lettered it): ' +
      'see why with `npm run ops -- webhooks:list --state dead`, fix the cause, then `npm run ops -- webhooks:retry <message-id...>` ' +
      '(or --all-dead). An applied event without any delivery row means the notifier database lost rows (a partial restore, a manual ' +
      'delete): that webhook will never be sent, and a replay would be skipped as a duplicate. See docs/audit.md.',
  );
  const pending = await pendingNote(notifier);
  return pending ? { ...result, notes: [pending] } : result;
}

/**
 * How many deliveries wait to be delivered, and for how long the oldest has: not missing, but worth watching.
 * Read through the due index (every pending delivery has a due time; the index holds only rows that say so).
 */
async function pendingNote(notifier: EntityManager): Promise<Note | undefined> {
  const { rows } = await queryRows<{
    pending: number;
    in_flight: number;
    retrying: number;
    oldest_at: Date | null;
    oldest_age: number | null;
  }>(
    notifier,
    /* sql */ `
    SELECT count(*)::int AS pending,
           count(*) FILTER (WHERE leased_until > clock_timestamp())::int AS in_flight,
           count(*) FILTER (WHERE attempts > 0)::int AS retrying,
           min(created_at) AS oldest_at,
           floor(extract(epoch FROM clock_timestamp() - min(created_at)))::int AS oldest_age
    FROM webhook_deliveries WHERE state = 'pending' AND next_attempt_at IS NOT NULL`,
  );
  const { pending, in_flight, retrying, oldest_at, oldest_age } = rows[0];
  if (!pending) return undefined;
  return {
    note: 'webhook deliveries pending, not a mismatch (recorded, not delivered yet: `npm run ops -- webhooks:list --state pending`)',
    pending,
    inFlight: in_flight,
    retrying,
    oldestPendingAge: duration(oldest_age ?? 0),
    oldestPendingAgeSeconds: oldest_age,
    oldestPendingSince: oldest_at?.toISOString() ?? null,
  };
}
