import { Injectable, OnApplicationBootstrap, BeforeApplicationShutdown } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { InjectDataSource } from '@nestjs/typeorm';
import { PinoLogger } from 'nestjs-pino';
import { Counter, Gauge } from 'prom-client';
import { DataSource } from 'typeorm';
import { Topics } from '@app/contracts';
import { declareRetention, InboxConsumer, sweepInbox } from '@app/inbox';
import { createKafka } from '@app/platform';
import { FulfillmentConfig } from '../config';
import { handleOrderEvent } from './fulfillment.handler';

export const CONSUMER = 'fulfillment';

/** Consumes order events into shipments, once per message-id (libs/inbox), and forgets ids after INBOX_RETENTION_SECONDS. */
@Injectable()
export class FulfillmentConsumer implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly messages = new Counter({
    name: 'fulfillment_messages_total',
    help: 'Messages by what became of them: applied, skipped, duplicate, dead-lettered',
    labelNames: ['outcome'],
  });
  private readonly lag = new Gauge({ name: 'fulfillment_consumer_lag', help: 'Messages behind the partition end', labelNames: ['topic', 'partition'] });
  private readonly consumer: InboxConsumer;
  private readonly retentionSeconds: number;
  private sweepTimer?: NodeJS.Timeout;
  private starting?: Promise<void>;
  private stopped = false;

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly logger: PinoLogger,
    private readonly config: ConfigService<FulfillmentConfig, true>,
  ) {
    logger.setContext(FulfillmentConsumer.name);
    const get = <K extends keyof FulfillmentConfig>(key: K) => config.get(key, { infer: true }) as FulfillmentConfig[K];
    this.retentionSeconds = get('INBOX_RETENTION_SECONDS');
    const [min, max] = [get('FULFILLMENT_RETRY_MIN_MS'), get('FULFILLMENT_RETRY_MAX_MS')];
    this.consumer = new InboxConsumer({
      name: CONSUMER,
      kafka: createKafka({ brokers: get('KAFKA_BROKERS'), clientId: CONSUMER, logger: logger.logger }),
      topics: [Topics.orderEvents],
      dataSource,
      handler: handleOrderEvent,
      deadLetterTopic: Topics.deadLetters,
      maxAttempts: get('FULFILLMENT_MAX_ATTEMPTS'),
      retryDelayMs: (attempt) => Math.min(max, min * 2 ** (attempt - 1)),
      logger: logger.logger,
      onOutcome: (outcome) => this.messages.inc({ outcome }),
      sessionTimeoutMs: get('KAFKA_SESSION_TIMEOUT_MS'),
      onLag: (topic, partition, lag) => this.lag.set({ topic, partition: String(partition) }, lag),
      afterDatabaseCommit: get('CRASH_AFTER_DATABASE_COMMIT') ? () => process.kill(process.pid, 'SIGKILL') : undefined,
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
    await this.starting;
    await this.consumer.stop();
  }

  /** The topic may not exist yet (the relay creates it) and the broker may be down: keep trying. */
  private async startWhenKafkaAnswers(): Promise<void> {
    for (let attempt = 1; !this.stopped; attempt++) {
      try {
        await this.consumer.start();
        this.logger.info({ topics: [Topics.orderEvents] }, 'consuming');
        return;
      } catch (error) {
        const delay = Math.min(10_000, 250 * 2 ** Math.min(attempt, 6));
        this.logger.warn({ err: error, retryInMs: delay }, 'cannot start consuming yet; retrying');
        await this.consumer.stop().catch(() => undefined);
        await new Promise((resolve) => setTimeout(resolve, delay));
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
