import { EntityManager } from 'typeorm';
import { HEARTBEATS_BEFORE_GONE } from '@app/outbox';
import { queryRows, sqlState } from '@app/platform';

/** First key of the two-int advisory locks the relay takes: one lock per (RELAY_LOCK_CLASS, shard). */
export const RELAY_LOCK_CLASS = 0x0b0c;

/** A gone instance whose session still held shard locks, and was ended so that its shards can move. */
export interface EndedSession {
  instanceId: string;
  pid: number;
  silentSeconds: number;
  /** Whether the session was gone within a second; if not, the next heartbeat looks again. */
  ended: boolean;
}

/** How long a heartbeat waits for a session it ended to be gone (its locks with it). */
const END_SESSION_WAIT_MS = 1_000;
const INSUFFICIENT_PRIVILEGE = '42501';

interface GoneSessionRow {
  instance_id: string;
  pid: number;
  silent_seconds: number;
  ended: boolean;
}

/**
 * Which shards this relay instance owns. Ownership is a session-level PostgreSQL advisory lock per
 * shard, held on the relay's own connection: if the process or its connection dies, PostgreSQL
 * releases the locks and another instance takes the shards over. Instances announce themselves in
 * `outbox_relay_instances`, with the backend pid of that connection; each aims at a fair share
 * (ceil(shards / live instances)), releasing extras between batches and trying free shards, so shards
 * move as instances come and go.
 *
 * An instance silent for HEARTBEATS_BEFORE_GONE heartbeats is gone: it beats on a timer as well as at
 * each maintenance, except in an outage (Kafka or the database failing), so a silent one is frozen,
 * cut off, or unable to publish. If its session still holds shard
 * locks (the process is frozen, or cut off by a partition TCP has not noticed; PostgreSQL would keep
 * them for as long as the session lasts, hours), a live instance ends that session at its heartbeat,
 * and the shards are free for the fair shares. The gone instance may still have a batch in flight:
 * it can reach Kafka after the new owner's copies, as duplicates only, and a key's first copies stay in
 * order (each instance sends a batch only after the one before it was acknowledged).
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
    /** Told of every session of a gone instance this one ended, or why it could not end them. */
    private readonly onEnded: (ended: EndedSession[], refused?: string) => void = () => undefined,
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
    await this.endSessionsOfTheGone(session);
    const { rows } = await queryRows<{ alive: number }>(
      session,
      /* sql */ `
      SELECT count(*)::int AS alive FROM outbox_relay_instances
      WHERE heartbeat_at > now() - make_interval(secs => $1)`,
      [this.goneAfterSeconds()],
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

  /**
   * Between maintenances, on any connection: this instance is alive. A batch in flight can outlast
   * three heartbeats on a loaded machine; a live instance is never taken for a gone one, so the relay
   * beats on a timer while it is not in an outage. Only an instance that has announced itself beats.
   */
  async beat(db: EntityManager): Promise<void> {
    await queryRows(db, /* sql */ `UPDATE outbox_relay_instances SET heartbeat_at = now() WHERE instance_id = $1`, [this.instanceId]);
  }

  /** Graceful exit: give every shard back at once and leave the instance list. */
  async releaseAll(session: EntityManager): Promise<void> {
    for (const shard of this.shards()) {
      await queryRows(session, /* sql */ `SELECT pg_advisory_unlock($1, $2)`, [RELAY_LOCK_CLASS, shard]);
    }
    this.owned.clear();
    await queryRows(session, /* sql */ `DELETE FROM outbox_relay_instances WHERE instance_id = $1`, [this.instanceId]);
  }

  private goneAfterSeconds(): number {
    return (HEARTBEATS_BEFORE_GONE * this.heartbeatMs) / 1000;
  }

  /**
   * Ends the sessions that hold shard locks for instances gone silent, and waits (a second at most) for
   * each to be gone. A pid is ended only while no live instance names it (a pid PostgreSQL gave again to
   * a live relay's session stays), and only if it holds shard locks (so never a session that is not a
   * relay's). An instance of an older relay names no pid, and is never ended.
   */
  private async endSessionsOfTheGone(session: EntityManager): Promise<void> {
    let rows: GoneSessionRow[];
    try {
      ({ rows } = await queryRows<GoneSessionRow>(
        session,
        /* sql */ `
        SELECT gone.instance_id, gone.backend_pid AS pid, extract(epoch FROM now() - gone.heartbeat_at)::float8 AS silent_seconds,
               pg_terminate_backend(gone.backend_pid, $3) AS ended
        FROM outbox_relay_instances gone
        WHERE gone.heartbeat_at <= now() - make_interval(secs => $2)
          AND gone.backend_pid IS NOT NULL AND gone.backend_pid <> pg_backend_pid()
          AND NOT EXISTS (
            SELECT FROM outbox_relay_instances live
            WHERE live.backend_pid = gone.backend_pid AND live.heartbeat_at > now() - make_interval(secs => $2))
          AND EXISTS (
            SELECT FROM pg_locks l
            WHERE l.pid = gone.backend_pid AND l.locktype = 'advisory' AND l.classid = $1 AND l.objsubid = 2 AND l.granted
              AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))`,
        [RELAY_LOCK_CLASS, this.goneAfterSeconds(), END_SESSION_WAIT_MS],
      ));
    } catch (error) {
      // Relays under different database roles cannot end each other's sessions: then only PostgreSQL's own timeouts do.
      if (sqlState(error) !== INSUFFICIENT_PRIVILEGE) throw error;
      this.onEnded([], (error as Error).message);
      return;
    }
    if (rows.length) {
      this.onEnded(rows.map((row) => ({ instanceId: row.instance_id, pid: row.pid, silentSeconds: row.silent_seconds, ended: row.ended })));
    }
  }

  private async announce(session: EntityManager): Promise<void> {
    await queryRows(
      session,
      /* sql */ `
      INSERT INTO outbox_relay_instances (instance_id, shards, last_publish_at, backend_pid) VALUES ($1, $2, $3, pg_backend_pid())
      ON CONFLICT (instance_id) DO UPDATE
      SET heartbeat_at = now(), shards = EXCLUDED.shards, last_publish_at = EXCLUDED.last_publish_at, backend_pid = EXCLUDED.backend_pid`,
      [this.instanceId, this.shards(), this.lastPublishAt],
    );
    await queryRows(session, /* sql */ `DELETE FROM outbox_relay_instances WHERE heartbeat_at < now() - interval '1 hour'`);
  }
}
