import { EntityManager } from 'typeorm';
import { OutboxRow } from '@app/outbox';
import { queryRows } from '@app/platform';

/** What an operator asks to replay. Times bound `published_at`: when the broker accepted the message. */
export interface ReplayFilters {
  fromSequence: string | null;
  toSequence: string | null;
  fromTime: Date | null;
  toTime: Date | null;
  topic: string | null;
  tenantId: string | null;
  messageKey: string | null;
}

/** The filters frozen at `selectedAt` (rows published later are the relay's), from after `afterSequence` on. */
export interface ReplaySelection extends ReplayFilters {
  selectedAt: Date;
  afterSequence: string | null;
}

export interface ReplayRow extends OutboxRow {
  published_at: Date;
}

/**
 * Already published rows only: unpublished and parked rows belong to the relay. Both ends inclusive.
 * Parameters $1-$9 come from `parameters(selection)`.
 */
const SELECTED = /* sql */ `
  o.published_at IS NOT NULL AND o.parked_at IS NULL
  AND o.published_at <= $1
  AND ($2::bigint IS NULL OR o.sequence >= $2::bigint)
  AND ($3::bigint IS NULL OR o.sequence <= $3::bigint)
  AND ($4::timestamptz IS NULL OR o.published_at >= $4::timestamptz)
  AND ($5::timestamptz IS NULL OR o.published_at <= $5::timestamptz)
  AND ($6::text IS NULL OR o.topic = $6::text)
  AND ($7::text IS NULL OR o.tenant_id = $7::text)
  AND ($8::text IS NULL OR o.message_key = $8::text)
  AND ($9::bigint IS NULL OR o.sequence > $9::bigint)`;

function parameters(s: ReplaySelection): unknown[] {
  return [s.selectedAt, s.fromSequence, s.toSequence, s.fromTime, s.toTime, s.topic, s.tenantId, s.messageKey, s.afterSequence];
}

export interface SelectionCounts {
  total: number;
  byTopic: Record<string, number>;
  byTenant: Record<string, number>;
}

export async function countSelection(manager: EntityManager, selection: ReplaySelection): Promise<SelectionCounts> {
  const { rows } = await queryRows<{ topic: string; tenant_id: string; n: string }>(
    manager,
    /* sql */ `SELECT o.topic, o.tenant_id, count(*) AS n FROM outbox_messages o WHERE ${SELECTED} GROUP BY 1, 2 ORDER BY 1, 2`,
    parameters(selection),
  );
  const counts: SelectionCounts = { total: 0, byTopic: {}, byTenant: {} };
  for (const row of rows) tally(counts, row.topic, row.tenant_id, Number(row.n));
  return counts;
}

export function tally(counts: SelectionCounts, topic: string, tenantId: string, n = 1): void {
  counts.total += n;
  counts.byTopic[topic] = (counts.byTopic[topic] ?? 0) + n;
  counts.byTenant[tenantId] = (counts.byTenant[tenantId] ?? 0) + n;
}

/**
 * Selected rows committed before `cutoff`: the ones a consumer with that cut-off may no longer remember.
 * Judged by `created_at`, not `published_at`: a copy can reach consumers long before its row is marked
 * (a relay that sent it and died before the mark, an acknowledgement lost in an outage), but never
 * before the row existed.
 */
export async function countCommittedBefore(manager: EntityManager, selection: ReplaySelection, cutoff: Date): Promise<number> {
  const { rows } = await queryRows<{ n: string }>(
    manager,
    /* sql */ `SELECT count(*) AS n FROM outbox_messages o WHERE ${SELECTED} AND o.created_at < $10`,
    [...parameters(selection), cutoff],
  );
  return Number(rows[0].n);
}

/** The next `limit` selected rows in sequence order: the order the relay published them in, per key. */
export async function nextBatch(manager: EntityManager, selection: ReplaySelection, limit: number): Promise<ReplayRow[]> {
  const { rows } = await queryRows<ReplayRow>(
    manager,
    /* sql */ `
    SELECT o.id, o.sequence, o.topic, o.message_key, o.event_type, o.event_version, o.tenant_id,
           o.payload, o.headers, o.created_at, o.published_at
    FROM outbox_messages o
    WHERE ${SELECTED}
    ORDER BY o.sequence
    LIMIT $10`,
    [...parameters(selection), limit],
  );
  return rows;
}
