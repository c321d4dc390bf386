/** Kafka header names carried by every message the relay publishes. */
export const Headers = {
  /** The outbox row id: stable forever, the consumers' dedupe key. */
  messageId: 'message-id',
  eventType: 'event-type',
  eventVersion: 'event-version',
  tenantId: 'tenant-id',
  aggregateId: 'aggregate-id',
  occurredAt: 'occurred-at',
  /** W3C trace context. */
  traceparent: 'traceparent',
  /** Set on re-published messages by an operator replay. */
  replayId: 'replay-id',
  /** Set on a dead letter an operator re-drove to its original topic (`ops dlq:redrive`): one id per run. */
  redriveId: 'redrive-id',
} as const;

/** Extra headers on a dead-lettered message, naming where it came from and why it failed. */
export const DeadLetterHeaders = {
  error: 'dlq-error',
  consumer: 'dlq-consumer',
  originalTopic: 'dlq-original-topic',
  originalPartition: 'dlq-original-partition',
  originalOffset: 'dlq-original-offset',
  attempts: 'dlq-attempts',
} as const;
