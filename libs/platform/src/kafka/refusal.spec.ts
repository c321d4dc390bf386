import { KafkaJSNumberOfRetriesExceeded, KafkaJSProtocolError } from 'kafkajs';
import { describeRefusal, kafkaRefusal } from './refusal';

/** A protocol error as the broker's answer makes it (kafkajs builds the type from the error code). */
function protocolError(type: string): KafkaJSProtocolError {
  return Object.assign(new KafkaJSProtocolError(`broker said ${type}`), { type });
}

describe('kafkaRefusal: Kafka refused the record for its own sake, or something else failed', () => {
  it.each(['MESSAGE_TOO_LARGE', 'RECORD_LIST_TOO_LARGE', 'INVALID_RECORD', 'CORRUPT_MESSAGE'])(
    '%s is a refusal, also wrapped by kafkajs retrier',
    (type) => {
      const refusal = protocolError(type);
      expect(kafkaRefusal(refusal)).toBe(refusal);
      expect(kafkaRefusal(new KafkaJSNumberOfRetriesExceeded(refusal, { retryCount: 3, retryTime: 2_000 }))).toBe(refusal);
      expect(kafkaRefusal(Object.assign(new Error('retries spent'), { errors: [new Error('first'), refusal] }))).toBe(refusal);
      expect(describeRefusal(refusal)).toBe(`${type}: broker said ${type}`);
    },
  );

  it('an outage, a timeout or a refusal kafkajs may fix by retrying is not one', () => {
    for (const error of [
      protocolError('NOT_LEADER_FOR_PARTITION'),
      protocolError('REQUEST_TIMED_OUT'),
      protocolError('OUT_OF_ORDER_SEQUENCE_NUMBER'),
      new Error('Connection error: connect ECONNREFUSED'),
      undefined,
    ]) {
      expect(kafkaRefusal(error)).toBeUndefined();
    }
  });

  it('follows a cycle of causes without looping', () => {
    const a: Error & { cause?: unknown } = new Error('a');
    a.cause = new Error('b', { cause: a });
    expect(kafkaRefusal(a)).toBeUndefined();
  });
});
