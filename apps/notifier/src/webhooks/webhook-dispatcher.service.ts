import { randomUUID } from 'node:crypto';
import { BeforeApplicationShutdown, Injectable, OnApplicationBootstrap } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { InjectDataSource } from '@nestjs/typeorm';
import { PinoLogger } from 'nestjs-pino';
import { Counter } from 'prom-client';
import { DataSource } from 'typeorm';
import { Backoff, inOneStatement, LoopWaits } from '@app/platform';
import { NotifierConfig } from '../config';
import { ClaimedDelivery, claimDue, DueFloor, settle, Settlement, sweepDelivered } from './delivery-store';
import { AttemptResult, PostOutcome, postWebhook } from './post-webhook';
import { nextRetryDelay } from './retry-schedule';
import { WebhookSigner } from './webhook-signer';

/** Results are written back in one statement once this many are waiting, or this long after the first. */
const SETTLE_BATCH = 200;
const SETTLE_DELAY_MS = 5;
const CLAIM_BACKOFF = { minMs: 100, maxMs: 10_000 };
/** A lease outlives its POST by this much, so only a dispatcher that died (or stalled) loses its rows. */
const LEASE_MARGIN_MS = 10_000;
/**
 * The claims' floor (DueFloor): looked for this often, this far before now at most. A delivery whose
 * recording transaction began more than the margin before a look is claimed up to one look late.
 */
const FLOOR = { lookEveryMs: 5_000, marginMs: 10_000 };
/** A receiver's Retry-After is honoured up to this long. */
const MAX_RETRY_AFTER_MS = 24 * 3600 * 1000;

/** The row's next state after one POST: delivered, pending again after the schedule's next wait, or dead with the reason. */
export function settlementOf(
  delivery: ClaimedDelivery,
  url: string,
  outcome: PostOutcome,
  schedule: number[],
  random: () => number = Math.random,
): Settlement {
  const base = { messageId: delivery.messageId, leaseId: delivery.leaseId, url, statusCode: outcome.statusCode };
  if (outcome.verdict === 'delivered') return { ...base, state: 'delivered', retryInMs: null, error: null };
  if (outcome.verdict === 'refused') return { ...base, state: 'dead', retryInMs: null, error: outcome.error ?? 'refused' };
  const attempts = delivery.attempts + 1;
  const delay = nextRetryDelay(schedule, attempts, random);
  if (delay === undefined) {
    return { ...base, state: 'dead', retryInMs: null, error: `retry schedule spent after ${attempts} attempts; last: ${outcome.error}` };
  }
  return {
    ...base,
    state: 'pending',
    retryInMs: Math.max(delay, Math.min(outcome.retryAfterMs ?? 0, MAX_RETRY_AFTER_MS)),
    error: outcome.error ?? null,
  };
}

/**
 * Delivers what the consumer recorded (webhook_deliveries, `pending`): up to WEBHOOK_CONCURRENCY
 * signed POSTs in flight, each order's webhooks one at a time and in order, every failure retried on
 * WEBHOOK_RETRY_SCHEDULE, dead with its reason when the schedule is spent. A receiver that is slow or
 * down delays its own deliveries only: the Kafka consumer never waits for a POST. Claims and settles,
 * a few per event, go out on the bare pg client (`inOneStatement`), prepared once per session: through
 * TypeORM's query runner PostgreSQL parsed and planned each one again, and planning the claim cost
 * it more than running it.
 */
@Injectable()
export class WebhookDispatcher implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly attemptsCounter = new Counter({
    name: 'notifier_webhook_attempts_total',
    help: 'Webhook POSTs by result: 2xx, 3xx, 4xx, 5xx, timeout, error (no answer)',
    labelNames: ['result'],
  });
  private readonly settledCounter = new Counter({
    name: 'notifier_webhook_deliveries_total',
    help: 'What each POST left the delivery as: delivered, retry (pending again), dead',
    labelNames: ['outcome'],
  });
  private readonly signer: WebhookSigner;
  private readonly settings: {
    /** Every delivery goes to the configured endpoint, pending ones recorded before it changed too. */
    url: string;
    concurrency: number;
    timeoutMs: number;
    pollMs: number;
    schedule: number[];
    retentionSeconds: number;
    sweepSeconds: number;
  };
  private readonly floor = new DueFloor(FLOOR);
  private readonly claimBackoff = new Backoff(CLAIM_BACKOFF);
  private inFlight = 0;
  private waiting: Settlement[] = [];
  private settleTimer?: NodeJS.Timeout;
  private settling = Promise.resolve();
  private stopped = false;
  private loop?: Promise<void>;
  /** Waits for work end on news (`wake`); the claim's backoff only on shutdown. */
  private readonly waits = new LoopWaits();
  private sweepTimer?: NodeJS.Timeout;

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly logger: PinoLogger,
    config: ConfigService<NotifierConfig, true>,
  ) {
    logger.setContext(WebhookDispatcher.name);
    const get = <K extends keyof NotifierConfig>(key: K) => config.get(key, { infer: true }) as NotifierConfig[K];
    const previous = get('WEBHOOK_PREVIOUS_SECRET');
    this.signer = new WebhookSigner([get('WEBHOOK_SECRET'), ...(previous ? [previous] : [])]);
    this.settings = {
      url: get('WEBHOOK_URL'),
      concurrency: get('WEBHOOK_CONCURRENCY'),
      timeoutMs: get('WEBHOOK_TIMEOUT_MS'),
      pollMs: get('WEBHOOK_POLL_INTERVAL_MS'),
      schedule: get('WEBHOOK_RETRY_SCHEDULE'),
      retentionSeconds: get('INBOX_RETENTION_SECONDS'),
      sweepSeconds: get('INBOX_SWEEP_INTERVAL_SECONDS'),
    };
  }

  onApplicationBootstrap(): void {
    this.loop = this.run();
    if (this.settings.sweepSeconds > 0) this.sweepTimer = setInterval(() => void this.sweep(), this.settings.sweepSeconds * 1000).unref();
  }

  /** Stops taking deliveries, lets the POSTs in flight end (each within WEBHOOK_TIMEOUT_MS) and records them. */
  async beforeApplicationShutdown(): Promise<void> {
    this.stopped = true;
    clearInterval(this.sweepTimer);
    this.waits.stop();
    await this.loop;
    while (this.inFlight > 0) await new Promise((resolve) => setTimeout(resolve, 10));
    await this.settleNow();
  }

  /**
   * New deliveries were committed (or earlier ones of an order settled): look now instead of at the
   * next poll. Never cuts a backoff short: while claims fail, that would retry once per event.
   */
  wake(): void {
    this.waits.notify();
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      const room = this.settings.concurrency - this.inFlight;
      let claimed: ClaimedDelivery[] = [];
      if (room > 0) {
        try {
          const floor = await this.floor.current(this.dataSource.manager);
          const leaseMs = this.settings.timeoutMs + LEASE_MARGIN_MS;
          claimed = await inOneStatement(this.dataSource, (client) => claimDue(client, randomUUID(), leaseMs, room, floor));
          this.claimBackoff.reset();
        } catch (error) {
          const delay = this.claimBackoff.next();
          this.logger.warn({ err: error, retryInMs: delay }, 'cannot claim webhook deliveries; retrying');
          await this.waits.wait(delay, 'backoff');
          continue;
        }
        for (const delivery of claimed) void this.deliver(delivery);
      }
      // A full claim may have left more due rows behind: go again (as soon as a POST frees room).
      // Otherwise nothing is due: wait for news (new rows, settled ones) or the next poll.
      if (room <= 0 || claimed.length < room) await this.waits.wait(this.settings.pollMs, 'work');
    }
  }

  private async deliver(delivery: ClaimedDelivery): Promise<void> {
    this.inFlight++;
    let outcome: PostOutcome;
    try {
      outcome = await postWebhook(
        this.settings.url,
        this.signer.headers(delivery.messageId, delivery.payload),
        delivery.payload,
        this.settings.timeoutMs,
      );
    } catch (error) {
      outcome = { result: 'error', verdict: 'retry', statusCode: null, error: (error as Error).message };
    }
    this.attemptsCounter.inc({ result: outcome.result satisfies AttemptResult });
    const settlement = settlementOf(delivery, this.settings.url, outcome, this.settings.schedule);
    this.settledCounter.inc({ outcome: settlement.state === 'pending' ? 'retry' : settlement.state });
    if (settlement.state !== 'delivered') {
      this.logger.warn(
        {
          messageId: delivery.messageId,
          orderId: delivery.orderId,
          attempt: delivery.attempts + 1,
          state: settlement.state,
          error: settlement.error,
          retryInMs: settlement.retryInMs,
        },
        'webhook not delivered',
      );
    } else {
      this.logger.debug({ messageId: delivery.messageId, orderId: delivery.orderId, attempt: delivery.attempts + 1 }, 'webhook delivered');
    }
    this.waiting.push(settlement);
    this.inFlight--;
    if (this.waiting.length >= SETTLE_BATCH) void this.settleNow();
    else this.settleTimer ??= setTimeout(() => void this.settleNow(), SETTLE_DELAY_MS);
  }

  /**
   * Writes the waiting results; those a failed write could not record stay for the next try (their lease
   * still guards them). Each settled row may free the next webhook of its order: wake the claim loop.
   */
  private settleNow(): Promise<void> {
    clearTimeout(this.settleTimer);
    this.settleTimer = undefined;
    this.settling = this.settling.then(async () => {
      const batch = this.waiting;
      if (!batch.length) return;
      this.waiting = [];
      try {
        await inOneStatement(this.dataSource, (client) => settle(client, batch));
        this.wake();
      } catch (error) {
        this.logger.warn({ err: error, deliveries: batch.length }, 'cannot record webhook results; retrying');
        this.waiting.unshift(...batch);
        // Unref'd: at shutdown the one last try is all; rows it could not record are delivered again when their lease ends.
        this.settleTimer ??= setTimeout(() => void this.settleNow(), 500).unref();
      }
    });
    return this.settling;
  }

  private async sweep(): Promise<void> {
    try {
      const deleted = await sweepDelivered(this.dataSource.manager, this.settings.retentionSeconds);
      if (deleted) this.logger.info({ deleted }, 'deleted delivered webhooks past the retention');
    } catch (error) {
      this.logger.warn({ err: error }, 'webhook delivery sweep failed; the next run retries');
    }
  }
}
