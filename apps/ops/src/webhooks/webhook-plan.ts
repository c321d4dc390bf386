import { CliError } from '../cli-error';
import { DeliveryState, RetrySelection } from './webhook-options';

/** A webhook_deliveries row as the plans judge it (read under a row lock, see webhook-deliveries.ts). */
export interface DeliveryRecord {
  messageId: string;
  tenant: string;
  order: string;
  eventType: string;
  state: DeliveryState;
  attempts: number;
  statusCode: number | null;
  /** Pending and leased until a time still ahead: a dispatcher is POSTing it right now. */
  inFlight: boolean;
  leasedUntil: Date | null;
  /** The body to POST is kept (rows delivered before the delivery queue existed have none). */
  hasPayload: boolean;
  deliveredAt: Date | null;
  deadAt: Date | null;
}

export interface Refusal {
  messageId: string;
  reason: string;
}

export interface Plan {
  /** The rows to change, in the order they were read. */
  change: DeliveryRecord[];
  /** Left as they are, and why (only --all-dead skips; named ones are all or nothing). */
  skipped: Refusal[];
}

const inFlight = (row: DeliveryRecord) =>
  `in flight: a dispatcher is POSTing it (leased until ${row.leasedUntil?.toISOString()}); try again once that attempt has settled`;

/**
 * Why `row` must not be retried, or undefined. A row in flight is left alone: the dispatcher records
 * its POST's result only while the row is still pending under its lease, and a retry would neither
 * hurry nor stop that POST.
 */
export function retryRefusal(row: DeliveryRecord, redeliver: boolean): string | undefined {
  if (row.inFlight) return inFlight(row);
  if (row.state === 'delivered' && !redeliver) {
    return (
      `already delivered at ${row.deliveredAt?.toISOString()} (HTTP ${row.statusCode ?? '?'}): a retry would POST it again; ` +
      'give --redeliver to send it anyway (same webhook-id: a receiver that still remembers it drops it as a duplicate)'
    );
  }
  if (!row.hasPayload) return 'no body kept to send (delivered before deliveries were queued): it cannot be sent again';
  return undefined;
}

/** Why `row` cannot be given up, or undefined. */
export function deadLetterRefusal(row: DeliveryRecord): string | undefined {
  if (row.state === 'delivered') return `already delivered at ${row.deliveredAt?.toISOString()}: nothing to give up`;
  if (row.state === 'dead') return `already dead since ${row.deadAt?.toISOString()}`;
  if (row.inFlight) return inFlight(row);
  return undefined;
}

/**
 * Named ids are all or nothing: an unknown id or a refusal fails the whole command (nothing changes),
 * so a typo never leaves half of a list done. For every dead one (--all-dead), refusals are skipped.
 */
function plan(
  rows: DeliveryRecord[],
  named: string[] | undefined,
  refusal: (row: DeliveryRecord) => string | undefined,
  what: string,
): Plan {
  const unknown = (named ?? []).filter((id) => !rows.some((row) => row.messageId === id));
  if (unknown.length) throw new CliError(`no webhook delivery ${unknown.join(', ')} (see webhooks:list); nothing changed`);
  const refused = rows.flatMap((row) => {
    const reason = refusal(row);
    return reason ? [{ messageId: row.messageId, reason }] : [];
  });
  if (named && refused.length) {
    throw new CliError(`refused, nothing ${what}: ${refused.map((r) => `${r.messageId}: ${r.reason}`).join('; ')}`);
  }
  return { change: rows.filter((row) => !refused.some((r) => r.messageId === row.messageId)), skipped: refused };
}

/** What webhooks:retry changes among `rows` (the named ones, or the dead ones it selected). */
export function planRetry(rows: DeliveryRecord[], selection: RetrySelection): Plan {
  const named = 'messageIds' in selection ? selection.messageIds : undefined;
  const redeliver = 'redeliver' in selection && selection.redeliver;
  return plan(rows, named, (row) => retryRefusal(row, redeliver), 'retried');
}

/** What webhooks:dead-letter changes among the named `rows`. */
export function planDeadLetter(rows: DeliveryRecord[], messageIds: string[]): Plan {
  return plan(rows, messageIds, deadLetterRefusal, 'dead-lettered');
}
