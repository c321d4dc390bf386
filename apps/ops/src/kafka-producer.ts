import { Injectable, OnApplicationShutdown } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { Kafka, Message, Producer } from 'kafkajs';
import { createKafka, orderedProducer } from '@app/platform';
import { CliError } from './cli-error';
import { OpsConfig } from './config';

/**
 * The producer ops publishes with, as the relay does: idempotent, `acks: -1`, one request in flight,
 * the Java-compatible partitioner (a key lands where the relay put it). Connected on first send, so
 * a dry run never needs Kafka; disconnected at exit.
 */
@Injectable()
export class KafkaProducer implements OnApplicationShutdown {
  private readonly kafka: Kafka;
  private producer?: Promise<Producer>;

  constructor(config: ConfigService<OpsConfig, true>) {
    this.kafka = createKafka({
      brokers: config.get('KAFKA_BROKERS', { infer: true }),
      clientId: 'ops',
      retry: { retries: 3, initialRetryTime: 200, maxRetryTime: 2_000 },
    });
  }

  /**
   * Resolves once every in-sync replica has the message; throws when Kafka refused it or is unreachable.
   * A failed send drops the producer: kafkajs rolled its sequence numbers back, perhaps for a message
   * the broker wrote, so the next send starts on a fresh one.
   */
  async send(topic: string, message: Message): Promise<void> {
    const producer = await this.connect();
    try {
      await producer.send({ topic, acks: -1, messages: [message] });
    } catch (error) {
      this.producer = undefined;
      await producer.disconnect().catch(() => undefined);
      throw error;
    }
  }

  async onApplicationShutdown(): Promise<void> {
    const producer = await this.producer?.catch(() => undefined);
    await producer?.disconnect().catch(() => undefined);
  }

  private connect(): Promise<Producer> {
    this.producer ??= (async () => {
      const producer = orderedProducer(this.kafka);
      try {
        await producer.connect();
      } catch (error) {
        throw new CliError(`cannot reach Kafka: ${(error as Error).message}`);
      }
      return producer;
    })();
    return this.producer;
  }
}
