import { Injectable, OnApplicationBootstrap, BeforeApplicationShutdown } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { InjectDataSource } from '@nestjs/typeorm';
import { PinoLogger } from 'nestjs-pino';
import { Counter, Gauge } from 'prom-client';
import { DataSource } from 'typeorm';
import { Topics } from '@app/contracts';
import { InboxConsumer } from '@app/inbox';
import { backoffDelay, createKafka } from '@app/platform';
import { FulfillmentConfig } from '../config';
import { handleOrderEvents } from './fulfillment.handler';

export const CONSUMER = 'fulfillment';

/** Consumes order events into shipments, once per message-id (libs/inbox), and forgets ids after INBOX_RETENTION_SECONDS. */
@Injectable()
export class FulfillmentConsumer implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly messages = new Counter({
    name: 'fulfillment_messages_total',
    help: 'Messages by what became of them: applied, skipped, duplicate, dead-lettered, dead-letter-refused (in dead_letters only)',
    labelNames: ['outcome'],
  });
  private readonly lag = new Gauge({ name: 'fulfillment_consumer_lag', help: 'Messages behind the partition end', labelNames: ['topic', 'partition'] });
  private readonly consumer: InboxConsumer;

  constructor(
    @InjectDataSource() dataSource: DataSource,
    logger: PinoLogger,
    config: ConfigService<FulfillmentConfig, true>,
  ) {
    logger.setContext(FulfillmentConsumer.name);
    const get = <K extends keyof FulfillmentConfig>(key: K) => config.get(key, { infer: true }) as FulfillmentConfig[K];
    const [min, max] = [get('FULFILLMENT_RETRY_MIN_MS'), get('FULFILLMENT_RETRY_MAX_MS')];
    this.consumer = new InboxConsumer({
      name: CONSUMER,
      kafka: createKafka({ brokers: get('KAFKA_BROKERS'), clientId: CONSUMER, logger: logger.logger }),
      topics: [Topics.orderEvents],
      dataSource,
      handler: handleOrderEvents,
      deadLetterTopic: Topics.deadLetters,
      maxAttempts: get('FULFILLMENT_MAX_ATTEMPTS'),
      retryDelayMs: (attempt) => backoffDelay(attempt, { minMs: min, maxMs: max }),
      logger: logger.logger,
      onOutcome: (outcome) => this.messages.inc({ outcome }),
      retentionSeconds: get('INBOX_RETENTION_SECONDS'),
      sweepIntervalSeconds: get('INBOX_SWEEP_INTERVAL_SECONDS'),
      sessionTimeoutMs: get('KAFKA_SESSION_TIMEOUT_MS'),
      onLag: (topic, partition, lag) => this.lag.set({ topic, partition: String(partition) }, lag),
      afterDatabaseCommit: get('CRASH_AFTER_DATABASE_COMMIT') ? () => process.kill(process.pid, 'SIGKILL') : undefined,
    });
  }

  onApplicationBootstrap(): Promise<void> {
    return this.consumer.run();
  }

  beforeApplicationShutdown(): Promise<void> {
    return this.consumer.stop();
  }
}
