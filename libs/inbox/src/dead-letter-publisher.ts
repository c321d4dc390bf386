import { Kafka, Producer } from 'kafkajs';
import { DeadLetterHeaders } from '@app/contracts';
import { describeRefusal, kafkaRefusal, orderedProducer } from '@app/platform';
import { InboxMessage } from './inbox-message';

export interface DeadLetterInput {
  consumer: string;
  message: InboxMessage;
  error: string;
  attempts: number;
}

/**
 * Sends dead letters, one record per request, with the idempotent producer. After any failed send the
 * producer is thrown away and the next send gets a new one (a new producer id): kafkajs rolls back the
 * failed request's sequence numbers even when the broker wrote it, and a producer that went on from
 * there could get OUT_OF_ORDER_SEQUENCE_NUMBER forever, or see its next dead letter acknowledged as a
 * duplicate of the written one and lost.
 */
export class DeadLetterPublisher {
  private producer?: Producer;
  /**
   * The send in flight. Partitions are consumed side by side (KAFKA_PARTITIONS_CONCURRENTLY), and a failed
   * send must throw its producer away before the next send goes: concurrent sends could reuse rolled-back
   * sequence numbers, or each make a new producer of their own (one of them never disconnected).
   */
  private sending: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly kafka: Kafka,
    private readonly topic: string,
  ) {}

  async connect(): Promise<void> {
    if (this.producer) return;
    // Few retries of its own: the consumer waits out a longer outage, heartbeating and watching its partition.
    const producer = orderedProducer(this.kafka, { retries: 3, initialRetryTime: 200, maxRetryTime: 2_000 });
    try {
      await producer.connect();
    } catch (error) {
      await producer.disconnect().catch(() => undefined);
      throw error;
    }
    this.producer = producer;
  }

  /**
   * Resolves with nothing once the topic has the dead letter, or with Kafka's refusal when the topic
   * will never take it (too large, say). Throws when Kafka could not be asked: try again later.
   */
  publish(input: DeadLetterInput): Promise<string | undefined> {
    const sent = this.sending.then(() => this.send(input));
    this.sending = sent.catch(() => undefined);
    return sent;
  }

  private async send({ consumer, message, error, attempts }: DeadLetterInput): Promise<string | undefined> {
    try {
      await this.connect();
      await this.producer!.send({
        topic: this.topic,
        acks: -1,
        messages: [
          {
            key: message.key,
            value: message.value,
            headers: {
              ...message.headers,
              [DeadLetterHeaders.error]: error.slice(0, 1000),
              [DeadLetterHeaders.consumer]: consumer,
              [DeadLetterHeaders.originalTopic]: message.topic,
              [DeadLetterHeaders.originalPartition]: String(message.partition),
              [DeadLetterHeaders.originalOffset]: message.offset,
              [DeadLetterHeaders.attempts]: String(attempts),
            },
          },
        ],
      });
      return undefined;
    } catch (failure) {
      await this.disconnect();
      const refusal = kafkaRefusal(failure);
      if (refusal) return describeRefusal(refusal);
      throw failure;
    }
  }

  async disconnect(): Promise<void> {
    const producer = this.producer;
    this.producer = undefined;
    await producer?.disconnect().catch(() => undefined);
  }
}
