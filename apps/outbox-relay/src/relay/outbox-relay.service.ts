import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { Injectable, OnApplicationBootstrap, BeforeApplicationShutdown } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { InjectDataSource } from '@nestjs/typeorm';
import { PinoLogger } from 'nestjs-pino';
import { KafkaJSError } from 'kafkajs';
import { DataSource } from 'typeorm';
import {
  claimBatch,
  ClaimFloor,
  deletePublishedBefore,
  lookAtFloor,
  markPublished,
  OUTBOX_CHANNEL,
  OutboxRow,
  parkMessage,
  prepareRelaySession,
} from '@app/outbox';
import type { PoolClient } from 'pg';
import { Backoff, DedicatedSession, expectCommitted, LoopWaits, pipelined, Queryable } from '@app/platform';
import { OutboxRelayConfig } from '../config';
import { KafkaPublisher, PublishOutcome } from './kafka-publisher';
import { RelayMetrics } from './relay-metrics';
import { ShardOwnership } from './shard-ownership';

/** A batch handed to Kafka: its ids, the publish under way, and when it was handed over. */
interface Sending {
  ids: string[];
  outcome: Promise<PublishOutcome>;
  started: bigint;
}

/**
 * Publishes committed outbox rows to Kafka, at least once, in per-key order.
 *
 * On the relay's own session: claim rows of owned shards (FOR UPDATE SKIP LOCKED, by sequence),
 * publish, mark published; while a batch is in flight the next is claimed and the previous marked, so
 * Kafka and PostgreSQL work at the same time (publishBacklog). A crash between send and mark
 * republishes the batch with the same message-ids; consumers absorb that. While Kafka is down nothing
 * is marked (no attempt counted) and the relay backs off; rows stay put. It wakes on NOTIFY and polls
 * as a fallback; a full batch is followed at once by the next (backlog drain).
 */
@Injectable()
export class OutboxRelay implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly instanceId = `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  private readonly ownership: ShardOwnership;
  private readonly backoff: Backoff;
  /** Where claims start in the unpublished index; from the bottom again at every heartbeat (claim-floor.ts). */
  private readonly floor = new ClaimFloor();
  private readonly settings: {
    shardCount: number;
    batchSize: number;
    pollMs: number;
    retentionSeconds: number;
    cleanupMs: number;
    heartbeatMs: number;
    /** How long a batch claimed ahead is held while Kafka has not answered the one in flight. */
    claimHoldMs: number;
  };
  /**
   * The relay's own connection: its shard locks, its LISTEN and its batches live and die together.
   * After any database error it is closed (never pooled), so PostgreSQL frees every lock it held.
   */
  private session?: DedicatedSession;
  private stopping = false;
  private loop?: Promise<void>;
  /** Waits for work end on NOTIFY (one that came while a batch ran ends the next at once); backoffs only on shutdown. */
  private readonly waits = new LoopWaits();
  private cleanupTimer?: NodeJS.Timeout;
  private cleaning = false;
  private heartbeatTimer?: NodeJS.Timeout;

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly publisher: KafkaPublisher,
    private readonly metrics: RelayMetrics,
    private readonly logger: PinoLogger,
    config: ConfigService<OutboxRelayConfig, true>,
  ) {
    logger.setContext(OutboxRelay.name);
    const get = <K extends keyof OutboxRelayConfig>(key: K) => config.get(key, { infer: true }) as OutboxRelayConfig[K];
    this.settings = {
      shardCount: get('RELAY_SHARDS'),
      batchSize: get('RELAY_BATCH_SIZE'),
      pollMs: get('RELAY_POLL_INTERVAL_MS'),
      retentionSeconds: get('OUTBOX_RETENTION_SECONDS'),
      cleanupMs: get('OUTBOX_CLEANUP_INTERVAL_SECONDS') * 1000,
      heartbeatMs: get('RELAY_HEARTBEAT_MS'),
      // Well inside the session's idle-in-transaction bound, whatever the time a ROLLBACK takes to arrive.
      claimHoldMs: Math.floor(get('DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS') / 3),
    };
    this.ownership = new ShardOwnership(this.instanceId, this.settings.shardCount, this.settings.heartbeatMs, (ended, refused) => {
      if (refused) this.logger.warn({ error: refused }, 'a relay instance gone silent still holds shards; cannot end its session');
      this.metrics.sessionsEnded.inc(ended.filter((one) => one.ended).length);
      for (const gone of ended) {
        this.logger.warn(
          { goneInstanceId: gone.instanceId, pid: gone.pid, silentSeconds: Math.round(gone.silentSeconds * 10) / 10, ended: gone.ended },
          'a relay instance gone silent still held shards; ended its session so they can move',
        );
      }
    });
    this.backoff = new Backoff({ minMs: get('RELAY_BACKOFF_MIN_MS'), maxMs: get('RELAY_BACKOFF_MAX_MS') });
  }

  onApplicationBootstrap(): void {
    this.logger.info({ instanceId: this.instanceId, shards: this.settings.shardCount }, 'outbox relay starting');
    this.loop = this.run();
    this.heartbeatTimer = setInterval(() => void this.beat(), this.settings.heartbeatMs).unref();
    if (this.settings.cleanupMs > 0) {
      this.cleanupTimer = setInterval(() => void this.cleanup(), this.settings.cleanupMs).unref();
    }
  }

  /**
   * Finishes the batch in flight and gives the shards back. Before-shutdown, so the database pool and
   * the producer (closed in onApplicationShutdown) are still there for that batch.
   */
  async beforeApplicationShutdown(): Promise<void> {
    this.stopping = true;
    clearInterval(this.cleanupTimer);
    clearInterval(this.heartbeatTimer);
    this.waits.stop();
    await this.loop;
    if (this.session && !this.session.lost) {
      await this.ownership.releaseAll(this.session.manager).catch(() => undefined);
    }
    await this.closeSession();
    this.logger.info({ instanceId: this.instanceId }, 'outbox relay stopped; shards released');
  }

  private async run(): Promise<void> {
    while (!this.stopping) {
      try {
        // Topics exist before anything is published (and before consumers subscribe), also after an outage.
        await this.publisher.ready();
        const session = await this.openSession();
        // Shards change only here, and the floor holds for the shards it was seen with; starting from the
        // bottom once a heartbeat also bounds how long a row no rule of the floor foresaw can wait.
        if (await this.ownership.maintain(session.manager)) this.floor.reset();
        this.metrics.ownedShards.set(this.ownership.shards().length);
        const claimed = await this.publishBacklog(session);
        this.backoff.reset();
        if (claimed < this.settings.batchSize) await this.waits.wait(this.settings.pollMs, 'work');
      } catch (error) {
        // kafkajs errors mean the broker; anything else went wrong on the database side.
        const kafka = error instanceof KafkaJSError && !this.session?.lost;
        this.metrics.failures.inc({ cause: kafka ? 'kafka' : 'database' });
        if (kafka) {
          this.metrics.kafkaUp.set(0);
        } else {
          // Whatever the error, the locks go with the connection: a session that may still hold them is
          // never reused, and an instance never believes it owns less than PostgreSQL says it does.
          this.ownership.forget();
          this.metrics.ownedShards.set(0);
          await this.closeSession();
        }
        const delay = this.backoff.next();
        this.logger.warn(
          { err: error, retryInMs: delay },
          kafka ? 'publish failed; rows kept, retrying' : 'database trouble; shards released, retrying',
        );
        // New commits during an outage must not cut the backoff short: only shutdown ends it.
        await this.waits.wait(delay, 'backoff');
      }
    }
  }

  /**
   * Publishes batch after batch while the backlog lasts or new rows keep being notified, keeping Kafka
   * busy: while one batch is in flight, the next is claimed and the one before is marked and
   * committed. A batch is sent only after the one before it was acknowledged in full (one request in
   * flight: per-key order). A refusal, an outage or a database error gives the batch claimed ahead
   * back unsent, and nothing is left in flight when this returns or throws. Rows in flight after
   * their claim committed stay this instance's: their shards change owner only in maintenance, which
   * waits for this to return, and the next claim skips them. Returns the size of the last claim (a
   * full one means there is more).
   */
  private async publishBacklog(session: DedicatedSession): Promise<number> {
    const shards = this.ownership.shards();
    if (!shards.length) return 0;
    const { batchSize } = this.settings;
    const db = session.connection;
    let sending: Sending | undefined;
    let claimed = 0;
    /** A transaction is open on the session: BEGIN was sent and neither COMMIT nor ROLLBACK yet. */
    let open = false;
    try {
      for (;;) {
        // Claim ahead while a batch is in flight when the last claim was full (a backlog) or new rows
        // were notified meanwhile (a steady trickle: they go out as soon as the batch before is acknowledged).
        // This claim sees every row committed before it starts: a notification that came earlier is
        // answered by it (its news taken); one that comes later is news again.
        const ahead = !this.stopping && !this.ownership.due() && (this.waits.takeNews() || !sending || claimed === batchSize);
        open = ahead;
        let rows = ahead ? await this.claim(db, shards, sending?.ids) : [];
        if (ahead || !sending) claimed = rows.length;
        const done = sending;
        sending = undefined;
        if (done && open && !(await this.answeredWithin(done.outcome, this.settings.claimHoldMs))) {
          // Kafka is slow: give the claim ahead back rather than sit idle in a transaction until
          // PostgreSQL ends the session (and the shards and the marks of the batch in flight with it).
          await db.query('ROLLBACK');
          open = false;
          rows = [];
        }
        const outcome = await done?.outcome;
        if (done && (outcome!.rejected.length || outcome!.interrupted)) {
          // The claim ahead may hold later rows of a refused key, or of a key whose rows an outage left
          // unsent: give it back unsent, settle what Kafka answered, then look again (after a refusal)
          // or back off (after an outage).
          if (open) await db.query('ROLLBACK');
          open = true;
          await db.query('BEGIN');
          await this.settle(db, outcome!);
          expectCommitted(await db.query('COMMIT'));
          open = false;
          this.report(done, outcome!);
          if (outcome!.interrupted) throw outcome!.interrupted;
          claimed = batchSize;
          continue;
        }
        if (rows.length && !this.stopping) sending = this.send(rows);
        await this.commit(db, open, done && outcome!.published);
        open = false;
        if (done) this.report(done, outcome!);
        if (!sending) return claimed;
      }
    } catch (error) {
      if (open) await db.query('ROLLBACK').catch(() => undefined);
      await sending?.outcome.catch(() => undefined);
      throw error;
    }
  }

  /** Whether `outcome` settles (either way) within `ms`. */
  private async answeredWithin(outcome: Promise<unknown>, ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<false>((resolve) => (timer = setTimeout(resolve, ms, false)));
    const answered = outcome.then(
      () => true as const,
      () => true as const,
    );
    try {
      return await Promise.race([answered, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Opens the loop's transaction and claims the next batch of `shards`, passing over the ids in flight:
   * BEGIN, the floor's look and the claim go out in one write. The claim reads from the floor as it was
   * before this look (a floor only rises, and one lower than it could be only reads further); the look
   * raises it for the next claim. Timed for `outbox_claim_duration_seconds`.
   */
  private async claim(db: PoolClient, shards: number[], exclude?: string[]): Promise<OutboxRow[]> {
    const done = this.metrics.claimSeconds.startTimer();
    const { shardCount, batchSize } = this.settings;
    const floor = this.floor.value;
    const [, sighting, rows] = await pipelined(
      db,
      () =>
        [
          db.query('BEGIN'),
          lookAtFloor(db, { shards, shardCount, floor }),
          claimBatch(db, { shards, shardCount, limit: batchSize, exclude, floor }),
        ] as const,
    );
    this.floor.observe(sighting);
    done();
    return rows;
  }

  /**
   * Marks the acknowledged ids and commits the loop's transaction, in one write; with no transaction
   * open the mark is a transaction of its own.
   */
  private async commit(db: PoolClient, open: boolean, published: string[] = []): Promise<void> {
    if (!open) return markPublished(db, published);
    const [, ended] = await pipelined(db, () => [markPublished(db, published), db.query('COMMIT')] as const);
    expectCommitted(ended);
  }

  private send(rows: OutboxRow[]): Sending {
    const outcome = this.publisher.publish(rows);
    outcome.catch(() => undefined); // awaited by the loop; a rejection before that is not unhandled
    return { ids: rows.map((row) => row.id), outcome, started: process.hrtime.bigint() };
  }

  /** Marks what Kafka acknowledged and parks what it refused, in the caller's transaction. */
  private async settle(on: Queryable, outcome: PublishOutcome): Promise<void> {
    await markPublished(on, outcome.published);
    for (const { id, error } of outcome.rejected) {
      await parkMessage(on, id, error);
      this.logger.error({ messageId: id, error }, 'Kafka refused an outbox message; parked it, its key waits for an operator');
    }
  }

  private report(batch: Sending, outcome: PublishOutcome): void {
    this.metrics.kafkaUp.set(1);
    this.metrics.published.inc(outcome.published.length);
    this.metrics.rejected.inc(outcome.rejected.length);
    const seconds = Number(process.hrtime.bigint() - batch.started) / 1e9;
    this.metrics.batchSeconds.observe(seconds);
    const counts = { claimed: batch.ids.length, published: outcome.published.length, parked: outcome.rejected.length };
    this.logger.info(
      { ...counts, shards: this.ownership.shards().length, durationMs: Math.round(seconds * 1000) },
      'outbox batch published',
    );
    this.ownership.lastPublishAt = new Date();
  }

  private async openSession(): Promise<DedicatedSession> {
    if (this.session && !this.session.lost) return this.session;
    await this.closeSession();
    this.ownership.forget();
    const session = await DedicatedSession.open(this.dataSource, {
      onLost: () => this.waits.notify(),
      onNotification: () => this.waits.notify(),
    });
    this.session = session;
    await session.manager.query(/* sql */ `LISTEN ${OUTBOX_CHANNEL}`);
    await prepareRelaySession(session.manager);
    return session;
  }

  private async closeSession(): Promise<void> {
    const session = this.session;
    this.session = undefined;
    await session?.close().catch((error) => this.logger.warn({ err: error }, 'closing the relay session failed'));
  }

  /**
   * The timer's heartbeat (ShardOwnership.beat), except in an outage (from a failure until a loop round
   * succeeds): peers then take the shards of an instance that cannot publish. A failed beat is the next one's to make.
   */
  private async beat(): Promise<void> {
    if (this.stopping || this.backoff.failing || !this.session || this.session.lost) return;
    await this.ownership.beat(this.dataSource.manager).catch((error) => this.logger.debug({ err: error }, 'heartbeat failed'));
  }

  /** One cleanup at a time: it runs until nothing past the retention is left, which may outlast its interval. */
  private async cleanup(): Promise<void> {
    if (this.cleaning) return;
    this.cleaning = true;
    try {
      const deleted = await deletePublishedBefore(this.dataSource.manager, { retentionSeconds: this.settings.retentionSeconds });
      if (deleted) this.logger.info({ deleted }, 'deleted published outbox rows past OUTBOX_RETENTION_SECONDS');
    } catch (error) {
      this.logger.warn({ err: error }, 'outbox cleanup failed; the next run retries');
    } finally {
      this.cleaning = false;
    }
  }
}
