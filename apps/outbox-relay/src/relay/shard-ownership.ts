import { EntityManager } from 'typeorm';
import { HEARTBEATS_BEFORE_GONE } from '@app/outbox';
import { queryRows } from '@app/platform';

/** First key of the two-int advisory locks the relay takes: one lock per (RELAY_LOCK_CLASS, shard). */
export const RELAY_LOCK_CLASS = 0x0b0c;

/**
 * Which shards this relay instance owns. Ownership is a session-level PostgreSQL advisory lock per
 * shard, held on the relay's own connection: if the process or its connection dies, PostgreSQL
 * releases the locks and another instance takes the shards over. Instances announce themselves in
 * `outbox_relay_instances`; each aims at a fair share (ceil(shards / live instances)), releasing
 * extras between batches and trying free shards, so shards move as instances come and go.
 */
export class ShardOwnership {
  private readonly owned = new Set<number>();
  private nextCheckAt = 0;
  /** Reported with the heartbeat, for `outbox:status`. */
  lastPublishAt: Date | null = null;

  constructor(
    private readonly instanceId: string,
    private readonly shardCount: number,
    private readonly heartbeatMs: number,
  ) {}

  shards(): number[] {
    return [...this.owned].sort((a, b) => a - b);
  }

  /** After the session is lost: PostgreSQL released every lock with it. */
  forget(): void {
    this.owned.clear();
    this.nextCheckAt = 0;
  }

  /** Whether `maintain` would do anything now: the relay finishes what it has in flight first. */
  due(): boolean {
    return Date.now() >= this.nextCheckAt;
  }

  /**
   * Heartbeat and rebalance, at most once per heartbeat interval. Run between batches, never inside one.
   * Returns whether it ran: only then can the shards have changed.
   */
  async maintain(session: EntityManager): Promise<boolean> {
    if (Date.now() < this.nextCheckAt) return false;
    this.nextCheckAt = Date.now() + this.heartbeatMs;
    await this.announce(session);
    const { rows } = await queryRows<{ alive: number }>(
      session,
      /* sql */ `
      SELECT count(*)::int AS alive FROM outbox_relay_instances
      WHERE heartbeat_at > now() - make_interval(secs => $1)`,
      [(HEARTBEATS_BEFORE_GONE * this.heartbeatMs) / 1000],
    );
    const target = Math.ceil(this.shardCount / Math.max(1, rows[0].alive));
    for (const shard of this.shards().slice(target)) {
      await queryRows(session, /* sql */ `SELECT pg_advisory_unlock($1, $2)`, [RELAY_LOCK_CLASS, shard]);
      this.owned.delete(shard);
    }
    const start = Math.floor(Math.random() * this.shardCount);
    for (let i = 0; i < this.shardCount && this.owned.size < target; i++) {
      const shard = (start + i) % this.shardCount;
      if (this.owned.has(shard)) continue;
      const { rows: got } = await queryRows<{ locked: boolean }>(session, /* sql */ `SELECT pg_try_advisory_lock($1, $2) AS locked`, [
        RELAY_LOCK_CLASS,
        shard,
      ]);
      if (got[0].locked) this.owned.add(shard);
    }
    await this.announce(session);
    return true;
  }

  /** Graceful exit: give every shard back at once and leave the instance list. */
  async releaseAll(session: EntityManager): Promise<void> {
    for (const shard of this.shards()) {
      await queryRows(session, /* sql */ `SELECT pg_advisory_unlock($1, $2)`, [RELAY_LOCK_CLASS, shard]);
    }
    this.owned.clear();
    await queryRows(session, /* sql */ `DELETE FROM outbox_relay_instances WHERE instance_id = $1`, [this.instanceId]);
  }

  private async announce(session: EntityManager): Promise<void> {
    await queryRows(
      session,
      /* sql */ `
      INSERT INTO outbox_relay_instances (instance_id, shards, last_publish_at) VALUES ($1, $2, $3)
      ON CONFLICT (instance_id) DO UPDATE
      SET heartbeat_at = now(), shards = EXCLUDED.shards, last_publish_at = EXCLUDED.last_publish_at`,
      [this.instanceId, this.shards(), this.lastPublishAt],
    );
    await queryRows(session, /* sql */ `DELETE FROM outbox_relay_instances WHERE heartbeat_at < now() - interval '1 hour'`);
  }
}
