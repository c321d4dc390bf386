import { randomUUID } from 'node:crypto';
import { Consumer, Kafka } from 'kafkajs';
import { Headers, Topics } from '@app/contracts';
import { eventually } from './eventually';

export interface ReadMessage {
  partition: number;
  offset: string;
  key: string;
  value: any;
  headers: Record<string, string>;
  /** When the producer created the message (ms since the epoch). */
  timestamp: number;
}

/**
 * Reads a topic from the beginning with a consumer group of its own, keeping the messages of one
 * tenant (by the `tenant-id` header; or of the tenants a predicate accepts) in the order each
 * partition delivered them.
 */
export class TopicReader {
  readonly messages: ReadMessage[] = [];
  private consumer?: Consumer;

  constructor(
    private readonly kafka: Kafka,
    private readonly tenantId: string | ((tenantId: string) => boolean),
    private readonly topic: string = Topics.orderEvents,
  ) {}

  async start(): Promise<void> {
    await waitForTopic(this.kafka, this.topic);
    this.consumer = this.kafka.consumer({ groupId: `e2e-reader-${randomUUID()}`, allowAutoTopicCreation: false });
    await this.consumer.connect();
    await this.consumer.subscribe({ topic: this.topic, fromBeginning: true });
    await this.consumer.run({
      eachMessage: async ({ partition, message }) => {
        const headers = Object.fromEntries(Object.entries(message.headers ?? {}).map(([name, value]) => [name, value?.toString() ?? '']));
        const tenantId = headers[Headers.tenantId];
        if (typeof this.tenantId === 'string' ? tenantId !== this.tenantId : !this.tenantId(tenantId)) return;
        this.messages.push({
          partition,
          offset: message.offset,
          key: message.key?.toString() ?? '',
          value: parseOrRaw(message.value?.toString() ?? ''),
          headers,
          timestamp: Number(message.timestamp),
        });
      },
    });
  }

  /** Waits until `predicate` holds for what was read, or fails after `timeoutMs`. */
  async until(predicate: (messages: ReadMessage[]) => boolean, timeoutMs = 60_000): Promise<ReadMessage[]> {
    await eventually(() => this.messages, predicate, { timeoutMs, what: "the topic's messages" });
    return this.messages;
  }

  async stop(): Promise<void> {
    await this.consumer?.disconnect();
  }
}

export function messageIds(messages: ReadMessage[]): string[] {
  return messages.map((m) => m.headers[Headers.messageId]);
}

/** Waits until `topic` exists with leaders (the relay creates it at start, a moment after it is live). */
export async function waitForTopic(kafka: Kafka, topic: string, timeoutMs = 30_000): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const led = async () =>
      (await admin.listTopics()).includes(topic) &&
      (await admin.fetchTopicMetadata({ topics: [topic] })).topics[0]?.partitions.every((p) => p.leader >= 0);
    await eventually(led, Boolean, { timeoutMs, what: `topic ${topic} with leaders` });
  } finally {
    await admin.disconnect();
  }
}

/** Dead-lettered messages may carry payloads that are not JSON: keep those as text. */
function parseOrRaw(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
