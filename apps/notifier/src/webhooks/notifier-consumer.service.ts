import { Injectable, OnApplicationBootstrap, BeforeApplicationShutdown } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { InjectDataSource } from '@nestjs/typeorm';
import { PinoLogger } from 'nestjs-pino';
import { Counter, Gauge } from 'prom-client';
import { DataSource } from 'typeorm';
import { Topics } from '@app/contracts';
import { declareRetention, InboxConsumer, sweepInbox } from '@app/inbox';
import { createKafka } from '@app/platform';
import { NotifierConfig } from '../config';
import { webhookHandler } from './webhook.handler';

export const CONSUMER = 'notifier';

/**
 * Consumes order events and POSTs a webhook per OrderPlaced, once per message-id as far as this
 * database knows (libs/inbox, one message per transaction). The receiver must deduplicate by the
 * `Idempotency-Key` header: see docs/notifier.md for where our guarantee stops.
 */
@Injectable()
export class NotifierConsumer implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly messages = new Counter({
    name: 'notifier_messages_total',
    help: 'Messages by what became of them: applied, skipped, duplicate, dead-lettered',
    labelNames: ['outcome'],
  });
  private readonly webhookAttempts = new Counter({
    name: 'notifier_webhook_attempts_total',
    help: 'Webhook POSTs by result: 2xx, 3xx, 4xx, 5xx, timeout, error (no answer)',
    labelNames: ['result'],
  });
  private readonly lag = new Gauge({ name: 'notifier_consumer_lag', help: 'Messages behind the partition end', labelNames: ['topic', 'partition'] });
  private readonly consumer: InboxConsumer;
  private readonly retentionSeconds: number;
  /** POSTs made per message-id still in progress (recorded as `attempts` on delivery). */
  private readonly attempts = new Map<string, number>();
  private sweepTimer?: NodeJS.Timeout;
  private starting?: Promise<void>;
  private stopped = false;
  private wakeUp?: () => void;

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly logger: PinoLogger,
    private readonly config: ConfigService<NotifierConfig, true>,
  ) {
    logger.setContext(NotifierConsumer.name);
    const get = <K extends keyof NotifierConfig>(key: K) => config.get(key, { infer: true }) as NotifierConfig[K];
    this.retentionSeconds = get('INBOX_RETENTION_SECONDS');
    const [min, max] = [get('NOTIFIER_RETRY_MIN_MS'), get('NOTIFIER_RETRY_MAX_MS')];
    this.consumer = new InboxConsumer({
      name: CONSUMER,
      kafka: createKafka({ brokers: get('KAFKA_BROKERS'), clientId: CONSUMER, logger: logger.logger }),
      topics: [Topics.orderEvents],
      dataSource,
      handler: webhookHandler({
        url: get('WEBHOOK_URL'),
        timeoutMs: get('WEBHOOK_TIMEOUT_MS'),
        countAttempt: (messageId) => {
          const count = (this.attempts.get(messageId) ?? 0) + 1;
          this.attempts.set(messageId, count);
          return count;
        },
        onAttempt: (result) => this.webhookAttempts.inc({ result }),
      }),
      deadLetterTopic: Topics.deadLetters,
      maxAttempts: get('NOTIFIER_MAX_ATTEMPTS'),
      // Exponential, with equal jitter so receivers recovering from an outage are not hit in step.
      retryDelayMs: (attempt) => {
        const delay = Math.min(max, min * 2 ** (attempt - 1));
        return Math.round(delay / 2 + (Math.random() * delay) / 2);
      },
      logger: logger.logger,
      onOutcome: (outcome, message) => {
        this.messages.inc({ outcome });
        if (message.messageId) this.attempts.delete(message.messageId);
      },
      // A webhook is an external effect: a rolled-back batch must not have called out for messages that run again.
      oneAtATime: true,
      sessionTimeoutMs: get('KAFKA_SESSION_TIMEOUT_MS'),
      onLag: (topic, partition, lag) => this.lag.set({ topic, partition: String(partition) }, lag),
    });
  }

  async onApplicationBootstrap(): Promise<void> {
    await declareRetention(this.dataSource.manager, CONSUMER, this.retentionSeconds);
    this.starting = this.startWhenKafkaAnswers();
    const sweepSeconds = this.config.get('INBOX_SWEEP_INTERVAL_SECONDS', { infer: true });
    if (sweepSeconds > 0) this.sweepTimer = setInterval(() => void this.sweep(), sweepSeconds * 1000).unref();
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopped = true;
    clearInterval(this.sweepTimer);
    this.wakeUp?.();
    await this.starting;
    await this.consumer.stop();
  }

  /** The topic may not exist yet (the relay creates it at its start) and the broker may be down: keep trying. */
  private async startWhenKafkaAnswers(): Promise<void> {
    for (let attempt = 1; !this.stopped; attempt++) {
      try {
        await this.consumer.start();
        this.logger.info({ topics: [Topics.orderEvents], webhookUrl: this.config.get('WEBHOOK_URL', { infer: true }) }, 'consuming');
        return;
      } catch (error) {
        const delay = Math.min(10_000, 250 * 2 ** Math.min(attempt, 6));
        this.logger.warn({ err: error, retryInMs: delay }, 'cannot start consuming yet; retrying');
        await this.consumer.stop().catch(() => undefined);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, delay);
          this.wakeUp = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
    }
  }

  private async sweep(): Promise<void> {
    try {
      const deleted = await sweepInbox(this.dataSource.manager, { consumer: CONSUMER, retentionSeconds: this.retentionSeconds });
      if (deleted) this.logger.info({ deleted }, 'forgot message-ids past INBOX_RETENTION_SECONDS');
    } catch (error) {
      this.logger.warn({ err: error }, 'inbox sweep failed; the next run retries');
    }
  }
}
