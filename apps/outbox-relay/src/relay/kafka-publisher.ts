import { Injectable, OnApplicationShutdown } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { Kafka, Message, Producer } from 'kafkajs';
import { PinoLogger } from 'nestjs-pino';
import { Topics } from '@app/contracts';
import { OutboxRow, toKafkaMessage } from '@app/outbox';
import { createKafka, describeRefusal, ensureTopics, javaCompatiblePartitioner, kafkaRefusal, orderedProducer } from '@app/platform';
import { OutboxRelayConfig } from '../config';

export interface PublishOutcome {
  published: string[];
  rejected: { id: string; error: string }[];
  /**
   * The failure that ended a search for refused rows early (an outage): rows neither published nor
   * rejected were not sent, or not acknowledged.
   */
  interrupted?: unknown;
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
    await ensureTopics(this.kafka, Object.values(Topics), this.partitions);
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
    return this.isolateRefused(rows);
  }

  /**
   * After a request Kafka refused in part. The broker wrote the request's other partitions, yet kafkajs
   * rolled back the idempotent sequence numbers of all of them, so the only safe next send on this
   * producer is each partition's batch exactly as it was: the broker acknowledges a batch it already
   * wrote as a duplicate instead of writing it twice. A partition whose batch fails again wrote nothing
   * (one partition per request now, so kafkajs's rollback is right) and is searched one row at a time.
   * After a refused row, nothing more of its key is sent: those rows stay unpublished, behind the parked
   * one. Any other failure resets the producer and ends the search with what went out, and the failure
   * as `interrupted` (it throws when nothing went out).
   */
  private async isolateRefused(rows: OutboxRow[]): Promise<PublishOutcome> {
    const outcome: PublishOutcome = { published: [], rejected: [] };
    try {
      for (const batch of await this.byPartition(rows)) {
        try {
          await this.send(batch);
          outcome.published.push(...batch.map((row) => row.id));
          continue;
        } catch (error) {
          if (!rejectedForItsOwnSake(error)) throw error;
        }
        const heldBack = new Set<string>();
        for (const row of batch) {
          if (heldBack.has(row.message_key)) continue;
          try {
            await this.send([row]);
            outcome.published.push(row.id);
          } catch (error) {
            if (!rejectedForItsOwnSake(error)) throw error;
            outcome.rejected.push({ id: row.id, error: describe(error) });
            heldBack.add(row.message_key);
          }
        }
      }
    } catch (error) {
      await this.reset(error);
      if (!outcome.published.length && !outcome.rejected.length) throw error;
      outcome.interrupted = error;
    }
    return outcome;
  }

  /** The rows grouped as kafkajs grouped them into partitions (same partitioner, current partition counts), in order. */
  private async byPartition(rows: OutboxRow[]): Promise<OutboxRow[][]> {
    const topics = [...new Set(rows.map((row) => row.topic))];
    const admin = this.kafka.admin();
    await admin.connect();
    const metadata = await admin.fetchTopicMetadata({ topics }).finally(() => admin.disconnect());
    const partitionsOf = new Map(metadata.topics.map(({ name, partitions }) => [name, partitions]));
    const partitionOf = javaCompatiblePartitioner();
    const batches = new Map<string, OutboxRow[]>();
    for (const row of rows) {
      const partitionMetadata = partitionsOf.get(row.topic) ?? [];
      const partition = partitionOf({ topic: row.topic, partitionMetadata, message: toKafkaMessage(row) });
      const id = `${row.topic}\u0000${partition}`;
      const batch = batches.get(id);
      if (batch) batch.push(row);
      else batches.set(id, [row]);
    }
    return [...batches.values()];
  }

  async onApplicationShutdown(): Promise<void> {
    await this.producer?.disconnect().catch(() => undefined);
  }

  private async send(rows: OutboxRow[]): Promise<void> {
    const byTopic = new Map<string, Message[]>();
    for (const row of rows) {
      const messages = byTopic.get(row.topic);
      if (messages) messages.push(toKafkaMessage(row));
      else byTopic.set(row.topic, [toKafkaMessage(row)]);
    }
    await this.producer!.sendBatch({
      acks: -1,
      topicMessages: [...byTopic].map(([topic, messages]) => ({ topic, messages })),
    });
  }

  /** Drops the producer after a failure it may have stale sequence numbers from, so the next send starts from scratch. */
  private async reset(error: unknown): Promise<unknown> {
    const producer = this.producer;
    this.producer = undefined;
    await producer?.disconnect().catch(() => undefined);
    return error;
  }
}

function rejectedForItsOwnSake(error: unknown): boolean {
  return kafkaRefusal(error) !== undefined;
}

function describe(error: unknown): string {
  const refusal = kafkaRefusal(error);
  return refusal ? describeRefusal(refusal) : String((error as Error)?.message ?? error);
}
