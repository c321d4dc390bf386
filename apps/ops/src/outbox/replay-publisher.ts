import { Message, Producer } from 'kafkajs';
import { Headers } from '@app/contracts';
import { OutboxRow, toKafkaMessage } from '@app/outbox';
import { createKafka, ensureTopics, orderedProducer } from '@app/platform';
import { CliError } from '../cli-error';

/**
 * Publishes outbox rows again exactly as the relay did (`toKafkaMessage`: same key, value and headers,
 * the original message-id) plus a `replay-id` header, with the relay's producer settings: idempotent,
 * acks -1, one request in flight and the Java-compatible murmur2 partitioner, so a key keeps its
 * partition and its order.
 */
export class ReplayPublisher {
  private constructor(
    private readonly producer: Producer,
    /** Topics that did not exist and were created with the configured partitions. */
    readonly createdTopics: string[],
  ) {}

  /** Connects, and first creates the topics that are missing (a topic recreated after data loss). */
  static async connect({
    brokers,
    partitions,
    topics,
  }: {
    brokers: string[];
    partitions: number;
    topics: string[];
  }): Promise<ReplayPublisher> {
    const kafka = createKafka({
      brokers,
      clientId: 'ops-outbox-replay',
      retry: { retries: 5, initialRetryTime: 300, maxRetryTime: 5_000 },
    });
    try {
      const created = await ensureTopics(kafka, topics, partitions);
      const producer = orderedProducer(kafka, { retries: 5, initialRetryTime: 300, maxRetryTime: 5_000 });
      await producer.connect();
      return new ReplayPublisher(producer, created);
    } catch (error) {
      throw new CliError(`cannot reach Kafka at ${brokers.join(',')}: ${(error as Error).message}`);
    }
  }

  /** Resolves once Kafka acknowledged every message (acks -1); throws otherwise. */
  async publish(rows: OutboxRow[], replayId: string): Promise<void> {
    const byTopic = new Map<string, Message[]>();
    for (const row of rows) {
      const message = toKafkaMessage(row);
      message.headers = { ...message.headers, [Headers.replayId]: replayId };
      byTopic.set(row.topic, [...(byTopic.get(row.topic) ?? []), message]);
    }
    await this.producer.sendBatch({ acks: -1, topicMessages: [...byTopic].map(([topic, messages]) => ({ topic, messages })) });
  }

  async close(): Promise<void> {
    await this.producer.disconnect().catch(() => undefined);
  }
}
