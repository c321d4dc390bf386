import { Kafka, logLevel as KafkaLogLevel, LogEntry, Producer, RetryOptions } from 'kafkajs';
import type { Logger } from 'pino';
import { javaCompatiblePartitioner } from './partitioner';

export interface KafkaClientInput {
  brokers: string[];
  clientId: string;
  /** Where kafkajs' own log lines go; they arrive as structured pino records. */
  logger?: Logger;
  connectionTimeoutMs?: number;
  requestTimeoutMs?: number;
  retry?: RetryOptions;
}

const levels: Record<number, 'error' | 'warn' | 'info' | 'debug'> = {
  [KafkaLogLevel.ERROR]: 'error',
  [KafkaLogLevel.WARN]: 'warn',
  [KafkaLogLevel.INFO]: 'info',
  [KafkaLogLevel.DEBUG]: 'debug',
};

/**
 * kafkajs logs every error response from a broker ("Response Metadata(...)") at ERROR, even the
 * ones it retries itself, such as a coordinator still loading after a broker start. What really
 * fails reaches our code as a thrown error, which is logged there; the response itself is a warning.
 */
function levelOf(level: KafkaLogLevel, message: string): 'error' | 'warn' | 'info' | 'debug' {
  if (level === KafkaLogLevel.ERROR && message.startsWith('Response ')) return 'warn';
  return levels[level] ?? 'info';
}

/** A kafkajs client whose logs go through the app's pino logger instead of stdout noise. */
export function createKafka(input: KafkaClientInput): Kafka {
  const logger = input.logger?.child({ component: 'kafkajs' });
  return new Kafka({
    clientId: input.clientId,
    brokers: input.brokers,
    connectionTimeout: input.connectionTimeoutMs ?? 3_000,
    requestTimeout: input.requestTimeoutMs ?? 30_000,
    retry: input.retry ?? { initialRetryTime: 300, retries: 8, maxRetryTime: 10_000 },
    logLevel: logger ? KafkaLogLevel.INFO : KafkaLogLevel.NOTHING,
    logCreator:
      () =>
      ({ level, log }: LogEntry) => {
        const { message, ...extra } = log;
        logger?.[levelOf(level, message)](extra, message);
      },
  });
}

/**
 * The producer everything here publishes with (relay, replay, re-drive, dead letters): idempotent,
 * one request in flight (a retry cannot reorder a key's messages) and the Java-compatible murmur2
 * partitioner, so a key lands on the same partition whichever of them sent it. Topics are never
 * auto-created. Callers send with `acks: -1`.
 */
export function orderedProducer(kafka: Kafka, retry?: RetryOptions): Producer {
  return kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    createPartitioner: javaCompatiblePartitioner,
    allowAutoTopicCreation: false,
    ...(retry ? { retry } : {}),
  });
}
