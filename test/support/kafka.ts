import { randomUUID } from 'node:crypto';
import { Kafka, Message, Producer } from 'kafkajs';
import { Headers, Topics } from '@app/contracts';
import { createKafka, ensureTopics, murmur2 } from '@app/platform';
import { testEnv } from './test-env';

export function testKafka(clientId = 'e2e'): Kafka {
  return createKafka({ brokers: testEnv.kafkaBrokers.split(','), clientId });
}

/** A topic name no other run has used, so suites never see each other's messages. */
export function uniqueTopic(purpose: string): string {
  return `e2e.${purpose}.${randomUUID().slice(0, 8)}`;
}

/** Partitions of each service topic ensureServiceTopics creates, as the relay would. */
export const SERVICE_TOPIC_PARTITIONS = 6;

/** Creates the service's topics if the relay has not yet, as the relay would (6 partitions). */
export async function ensureServiceTopics(kafka: Kafka): Promise<void> {
  await ensureTopics(kafka, Object.values(Topics), SERVICE_TOPIC_PARTITIONS);
}

/** The partition of a service topic the java-compatible partitioner (every producer of the service) gives `key`. */
export function servicePartitionOf(key: string): number {
  return (murmur2(Buffer.from(key)) & 0x7fffffff) % SERVICE_TOPIC_PARTITIONS;
}

export interface OrderEventInput {
  messageId?: string;
  type: string;
  version?: number;
  tenantId: string;
  key: string;
  payload: unknown;
  /** Sent as the value as it is, for malformed payloads. */
  rawValue?: string;
  /** The `occurred-at` header (now by default). */
  occurredAt?: string;
}

/** An order event as the relay would publish it, with the relay's headers, for `producer.send`. */
export function orderEventMessage(event: OrderEventInput & { messageId: string }): Message {
  return {
    key: event.key,
    value: event.rawValue ?? JSON.stringify(event.payload),
    headers: {
      [Headers.messageId]: event.messageId,
      [Headers.eventType]: event.type,
      [Headers.eventVersion]: String(event.version ?? 1),
      [Headers.tenantId]: event.tenantId,
      [Headers.aggregateId]: event.key,
      [Headers.occurredAt]: event.occurredAt ?? new Date().toISOString(),
    },
  };
}

/** Produces an order event as the relay would, with the relay's headers. Returns its message-id. */
export async function produceOrderEvent(producer: Producer, event: OrderEventInput): Promise<string> {
  const messageId = event.messageId ?? randomUUID();
  await producer.send({ topic: Topics.orderEvents, acks: -1, messages: [orderEventMessage({ ...event, messageId })] });
  return messageId;
}

/**
 * Moves each consumer group's committed offsets on `topic` to its end, so consumers started next see
 * only messages produced from now on, not what earlier suites left unconsumed. The group must have
 * no running member: a consumer another suite killed counts until its session times out, so retry.
 */
export async function skipConsumerBacklog(kafka: Kafka, groupIds: string[], topic: string, timeoutMs = 60_000): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    for (const groupId of groupIds) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        try {
          // Explicit high watermarks: resetOffsets({ earliest: false }) commits the sentinel -1, which a
          // consumer subscribed fromBeginning reads as "no offset" and starts over from the first message.
          const partitions = (await admin.fetchTopicOffsets(topic)).map(({ partition, high }) => ({ partition, offset: high }));
          await admin.setOffsets({ groupId, topic, partitions });
          break;
        } catch (error) {
          if (Date.now() > deadline) throw error;
          await new Promise((resolve) => setTimeout(resolve, 1_000));
        }
      }
    }
  } finally {
    await admin.disconnect();
  }
}

/**
 * What a suite that runs notifiers needs first: the service's topics (the relay would create them),
 * the notifier group at the order topic's end (what other suites left there is not the suite's
 * business), and an idempotent producer, connected, to play the relay.
 */
export async function readyForNotifiers(kafka: Kafka): Promise<Producer> {
  await ensureServiceTopics(kafka);
  await skipConsumerBacklog(kafka, ['notifier'], Topics.orderEvents);
  const producer = kafka.producer({ idempotent: true });
  await producer.connect();
  return producer;
}
