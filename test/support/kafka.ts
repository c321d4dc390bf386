import { randomUUID } from 'node:crypto';
import { Kafka } from 'kafkajs';
import { createKafka } from '@app/platform';
import { testEnv } from './test-env';

export function testKafka(clientId = 'e2e'): Kafka {
  return createKafka({ brokers: testEnv.kafkaBrokers.split(','), clientId });
}

/** A topic name no other run has used, so suites never see each other's messages. */
export function uniqueTopic(purpose: string): string {
  return `e2e.${purpose}.${randomUUID().slice(0, 8)}`;
}
