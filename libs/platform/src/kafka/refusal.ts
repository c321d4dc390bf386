import { KafkaJSProtocolError } from 'kafkajs';

/** Kafka refused the record for what it is (not because it is down): sending it again cannot help. */
const REFUSED_FOR_ITS_OWN_SAKE = new Set(['MESSAGE_TOO_LARGE', 'RECORD_LIST_TOO_LARGE', 'INVALID_RECORD', 'CORRUPT_MESSAGE']);

/**
 * The protocol error with which Kafka refused a record for its own sake, wherever kafkajs' retrier
 * wrapped it (`originalError`, `cause`, `errors`), or undefined for any other failure (an outage).
 */
export function kafkaRefusal(error: unknown, seen = new Set<unknown>()): KafkaJSProtocolError | undefined {
  if (!error || typeof error !== 'object' || seen.has(error)) return undefined;
  seen.add(error);
  if (error instanceof KafkaJSProtocolError && REFUSED_FOR_ITS_OWN_SAKE.has(error.type)) return error;
  const nested = error as { originalError?: unknown; cause?: unknown; errors?: unknown[] };
  for (const inner of [nested.originalError, nested.cause, ...(Array.isArray(nested.errors) ? nested.errors : [])]) {
    const refusal = kafkaRefusal(inner, seen);
    if (refusal) return refusal;
  }
  return undefined;
}

/** `TYPE: message` of a refusal, for `last_error` columns and logs. */
export function describeRefusal(refusal: KafkaJSProtocolError): string {
  return `${refusal.type}: ${refusal.message}`;
}
