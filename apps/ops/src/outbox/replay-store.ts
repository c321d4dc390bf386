import { EntityManager } from 'typeorm';
import { queryRows } from '@app/platform';
import { ReplayFilters, ReplaySelection } from './replay-selection';

export interface StoredReplay {
  id: string;
  selection: ReplaySelection;
  selected: number;
  forced: boolean;
  published: number;
  finishedAt: Date | null;
}

interface ReplayRecord {
  id: string;
  from_sequence: string | null;
  to_sequence: string | null;
  from_time: Date | null;
  to_time: Date | null;
  topic: string | null;
  tenant_id: string | null;
  message_key: string | null;
  selected_at: Date;
  selected: number;
  forced: boolean;
  last_sequence: string | null;
  published: number;
  finished_at: Date | null;
}

/** Records a replay before its first message goes out, so even a crash in the first batch can be resumed. */
export async function createReplay(
  manager: EntityManager,
  {
    id,
    filters,
    selectedAt,
    selected,
    forced,
  }: { id: string; filters: ReplayFilters; selectedAt: Date; selected: number; forced: boolean },
): Promise<void> {
  await queryRows(
    manager,
    /* sql */ `
    INSERT INTO outbox_replays (id, from_sequence, to_sequence, from_time, to_time, topic, tenant_id, message_key,
                                selected_at, selected, forced)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
    [
      id,
      filters.fromSequence,
      filters.toSequence,
      filters.fromTime,
      filters.toTime,
      filters.topic,
      filters.tenantId,
      filters.messageKey,
      selectedAt,
      selected,
      forced,
    ],
  );
}

export async function findReplay(manager: EntityManager, id: string): Promise<StoredReplay | null> {
  const { rows } = await queryRows<ReplayRecord>(manager, /* sql */ `SELECT * FROM outbox_replays WHERE id = $1`, [id]);
  const r = rows[0];
  if (!r) return null;
  return {
    id: r.id,
    selection: {
      fromSequence: r.from_sequence,
      toSequence: r.to_sequence,
      fromTime: r.from_time,
      toTime: r.to_time,
      topic: r.topic,
      tenantId: r.tenant_id,
      messageKey: r.message_key,
      selectedAt: r.selected_at,
      afterSequence: r.last_sequence,
    },
    selected: r.selected,
    forced: r.forced,
    published: r.published,
    finishedAt: r.finished_at,
  };
}

/** After Kafka acknowledged a batch: a resume starts after `lastSequence`. */
export async function recordProgress(manager: EntityManager, id: string, lastSequence: string, published: number): Promise<void> {
  await queryRows(
    manager,
    /* sql */ `UPDATE outbox_replays SET last_sequence = $2, published = published + $3, updated_at = now() WHERE id = $1`,
    [id, lastSequence, published],
  );
}

export async function markForced(manager: EntityManager, id: string): Promise<void> {
  await queryRows(manager, /* sql */ `UPDATE outbox_replays SET forced = true, updated_at = now() WHERE id = $1`, [id]);
}

export async function finishReplay(manager: EntityManager, id: string): Promise<void> {
  await queryRows(manager, /* sql */ `UPDATE outbox_replays SET finished_at = now(), updated_at = now() WHERE id = $1`, [id]);
}

/**
 * Holds a session-level advisory lock on the replay for as long as `manager`'s connection lives, so two
 * operators cannot run one replay at once. False when another session holds it.
 */
export async function lockReplay(manager: EntityManager, id: string): Promise<boolean> {
  const { rows } = await queryRows<{ locked: boolean }>(
    manager,
    /* sql */ `SELECT pg_try_advisory_lock(hashtext('outbox_replays'), hashtext($1)) AS locked`,
    [id],
  );
  return rows[0].locked;
}
