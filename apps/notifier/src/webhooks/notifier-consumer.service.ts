import { Injectable, OnApplicationBootstrap, BeforeApplicationShutdown } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { InjectDataSource } from '@nestjs/typeorm';
import { PinoLogger } from 'nestjs-pino';
import { Counter, Gauge } from 'prom-client';
import { DataSource } from 'typeorm';
import { Topics } from '@app/contracts';
import { InboxConsumer } from '@app/inbox';
import { createKafka } from '@app/platform';
import { NotifierConfig } from '../config';
import { callsOut, webhookHandler } from './webhook.handler';

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
    help: 'Messages by what became of them: applied, skipped, duplicate, dead-lettered, dead-letter-refused (in dead_letters only)',
    labelNames: ['outcome'],
  });
  private readonly webhookAttempts = new Counter({
    name: 'notifier_webhook_attempts_total',
    help: 'Webhook POSTs by result: 2xx, 3xx, 4xx, 5xx, timeout, error (no answer)',
    labelNames: ['result'],
  });
  private readonly lag = new Gauge({ name: 'notifier_consumer_lag', help: 'Messages behind the partition end', labelNames: ['topic', 'partition'] });
  private readonly consumer: InboxConsumer;
  /** POSTs made per message-id still in progress (recorded as `attempts` on delivery). */
  private readonly attempts = new Map<string, number>();

  constructor(
    @InjectDataSource() dataSource: DataSource,
    logger: PinoLogger,
    config: ConfigService<NotifierConfig, true>,
  ) {
    logger.setContext(NotifierConsumer.name);
    const get = <K extends keyof NotifierConfig>(key: K) => config.get(key, { infer: true }) as NotifierConfig[K];
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
      // A webhook is an external effect: a rolled-back batch must not have called out for messages
      // that run again. Every other message is skipped without a call and may share a transaction.
      oneAtATime: callsOut,
      retentionSeconds: get('INBOX_RETENTION_SECONDS'),
      sweepIntervalSeconds: get('INBOX_SWEEP_INTERVAL_SECONDS'),
      sessionTimeoutMs: get('KAFKA_SESSION_TIMEOUT_MS'),
      onLag: (topic, partition, lag) => this.lag.set({ topic, partition: String(partition) }, lag),
    });
  }

  onApplicationBootstrap(): Promise<void> {
    return this.consumer.run();
  }

  beforeApplicationShutdown(): Promise<void> {
    return this.consumer.stop();
  }
}
