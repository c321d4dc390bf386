import { BeforeApplicationShutdown, Injectable, OnApplicationBootstrap } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { InjectDataSource } from '@nestjs/typeorm';
import { PinoLogger } from 'nestjs-pino';
import { Counter, Gauge } from 'prom-client';
import { DataSource } from 'typeorm';
import { Topics } from '@app/contracts';
import { InboxConsumer } from '@app/inbox';
import { backoffDelay, createKafka } from '@app/platform';
import { NotifierConfig } from '../config';
import { deliveryRecorder } from './delivery-recorder';
import { WebhookDispatcher } from './webhook-dispatcher.service';

export const CONSUMER = 'notifier';

/**
 * Consumes order events and records one webhook delivery per OrderPlaced and OrderCancelled, once
 * per message-id (libs/inbox, batched transactions), then commits its offsets. It never calls out:
 * the dispatcher delivers what it recorded, so the consumer keeps up with the topic whatever the
 * receiver does. See docs/notifier.md.
 */
@Injectable()
export class NotifierConsumer implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly messages = new Counter({
    name: 'notifier_messages_total',
    help: 'Messages by what became of them: applied (delivery recorded), skipped, duplicate, dead-lettered, dead-letter-refused (in dead_letters only)',
    labelNames: ['outcome'],
  });
  private readonly lag = new Gauge({ name: 'notifier_consumer_lag', help: 'Messages behind the partition end', labelNames: ['topic', 'partition'] });
  private readonly consumer: InboxConsumer;

  constructor(
    @InjectDataSource() dataSource: DataSource,
    logger: PinoLogger,
    config: ConfigService<NotifierConfig, true>,
    dispatcher: WebhookDispatcher,
  ) {
    logger.setContext(NotifierConsumer.name);
    const get = <K extends keyof NotifierConfig>(key: K) => config.get(key, { infer: true }) as NotifierConfig[K];
    const [min, max] = [get('NOTIFIER_RETRY_MIN_MS'), get('NOTIFIER_RETRY_MAX_MS')];
    this.consumer = new InboxConsumer({
      name: CONSUMER,
      kafka: createKafka({ brokers: get('KAFKA_BROKERS'), clientId: CONSUMER, logger: logger.logger }),
      topics: [Topics.orderEvents],
      dataSource,
      handler: deliveryRecorder(get('WEBHOOK_URL')),
      deadLetterTopic: Topics.deadLetters,
      maxAttempts: get('NOTIFIER_MAX_ATTEMPTS'),
      retryDelayMs: (attempt) => backoffDelay(attempt, { minMs: min, maxMs: max }),
      logger: logger.logger,
      onOutcome: (outcome) => {
        this.messages.inc({ outcome });
        if (outcome === 'applied') dispatcher.wake();
      },
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
