import { Injectable, OnApplicationShutdown } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { Kafka, KafkaJSProtocolError, Message, Producer } from 'kafkajs';
import { PinoLogger } from 'nestjs-pino';
import { Topics } from '@app/contracts';
import { OutboxRow, toKafkaMessage } from '@app/outbox';
import { createKafka, orderedProducer } from '@app/platform';
import { OutboxRelayConfig } from '../config';

/** Kafka refused these messages for what they are (not because it is down): retrying cannot help. */
const REJECTED_FOR_ITS_OWN_SAKE = new Set(['MESSAGE_TOO_LARGE', 'RECORD_LIST_TOO_LARGE', 'INVALID_RECORD', 'CORRUPT_MESSAGE']);

export interface PublishOutcome {
  published: string[];
  rejected: { id: string; error: string }[];
}

/**
 * The idempotent kafkajs producer (acks -1, one request in flight, so a key's order survives retries).
 * An outage throws; messages Kafka rejects for their own sake come back as `rejected`.
 */
@Injectable()
export class KafkaPublisher implements OnApplicationShutdown {
  private readonly kafka: Kafka;
  private readonly partitions: number;
  private producer?: Producer;

  constructor(config: ConfigService<OutboxRelayConfig, true>, logger: PinoLogger) {
    this.kafka = createKafka({
      brokers: config.get('KAFKA_BROKERS', { infer: true }),
      clientId: 'outbox-relay',
      logger: logger.logger,
      retry: { retries: 2, initialRetryTime: 200, maxRetryTime: 2_000 },
    });
    this.partitions = config.get('KAFKA_TOPIC_PARTITIONS', { infer: true });
  }

  /** Connects and creates the service's topics on first use; after an outage, again. */
  async ready(): Promise<void> {
    if (this.producer) return;
    const admin = this.kafka.admin();
    await admin.connect();
    try {
      const existing = new Set(await admin.listTopics());
      const missing = Object.values(Topics).filter((topic) => !existing.has(topic));
      if (missing.length) {
        await admin.createTopics({ topics: missing.map((topic) => ({ topic, numPartitions: this.partitions })), waitForLeaders: true });
      }
    } finally {
      await admin.disconnect();
    }
    const producer = orderedProducer(this.kafka, { retries: 3, initialRetryTime: 200, maxRetryTime: 2_000 });
    await producer.connect();
    this.producer = producer;
  }

  async publish(rows: OutboxRow[]): Promise<PublishOutcome> {
    await this.ready();
    try {
      await this.send(rows);
      return { published: rows.map((row) => row.id), rejected: [] };
    } catch (error) {
      if (!rejectedForItsOwnSake(error)) throw await this.reset(error);
    }
    // Find the culprits one by one, in order; an outage in between stops here with what went out.
    const outcome: PublishOutcome = { published: [], rejected: [] };
    for (const row of rows) {
      try {
        await this.send([row]);
        outcome.published.push(row.id);
      } catch (error) {
        if (!rejectedForItsOwnSake(error)) {
          if (outcome.published.length || outcome.rejected.length) return outcome;
          throw await this.reset(error);
        }
        outcome.rejected.push({ id: row.id, error: describe(error) });
      }
    }
    return outcome;
  }

  async onApplicationShutdown(): Promise<void> {
    await this.producer?.disconnect().catch(() => undefined);
  }

  private async send(rows: OutboxRow[]): Promise<void> {
    const byTopic = new Map<string, Message[]>();
    for (const row of rows) byTopic.set(row.topic, [...(byTopic.get(row.topic) ?? []), toKafkaMessage(row)]);
    await this.producer!.sendBatch({
      acks: -1,
      topicMessages: [...byTopic].map(([topic, messages]) => ({ topic, messages })),
    });
  }

  /** Drops the producer after an outage so the next attempt reconnects from scratch. */
  private async reset(error: unknown): Promise<unknown> {
    const producer = this.producer;
    this.producer = undefined;
    await producer?.disconnect().catch(() => undefined);
    return error;
  }
}

function rejectedForItsOwnSake(error: unknown): boolean {
  const seen = new Set<unknown>();
  const visit = (e: unknown): boolean => {
    if (!e || typeof e !== 'object' || seen.has(e)) return false;
    seen.add(e);
    if (e instanceof KafkaJSProtocolError && REJECTED_FOR_ITS_OWN_SAKE.has(e.type)) return true;
    const nested = e as { originalError?: unknown; cause?: unknown; errors?: unknown[] };
    return visit(nested.originalError) || visit(nested.cause) || (nested.errors ?? []).some(visit);
  };
  return visit(error);
}

function describe(error: unknown): string {
  const e = error as { type?: string; message?: string };
  return [e.type, e.message].filter(Boolean).join(': ') || String(error);
}
