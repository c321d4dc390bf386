import { Headers } from '@app/contracts';
import { createKafka } from '@app/platform';
import { RunningApp, startApp } from './apps';
import { KafkaFaultProxy } from './kafka-fault-proxy';
import { OutboxDb } from './outbox-db';
import { privateDatabases } from './private-stack';
import { TestBroker } from './test-broker';
import { ReadMessage, TopicReader } from './topic-reader';

const FAST_RELAY = { RELAY_POLL_INTERVAL_MS: '100', RELAY_BACKOFF_MIN_MS: '100', RELAY_BACKOFF_MAX_MS: '500' };

/** What a suite's fixture holds once `beforeAll` ran. */
export interface RelayBehindAProxy {
  proxy: KafkaFaultProxy;
  outbox: OutboxDb;
  relay: RunningApp;
  /** Every message of the suite's tenants, read as the relay publishes them. */
  read: TopicReader;
}

/**
 * One relay on an orders database of its own, publishing to a broker of its own on `brokerPort` that
 * advertises a KafkaFaultProxy's port, so every connection of the relay passes through the proxy (and a
 * test chooses which requests fail or stall). Reads back what the relay publishes for tenants whose id
 * starts with `tenantPrefix`. Registers its own beforeAll/afterAll; `env` goes to the relay, over
 * FAST_RELAY (a relay that polls and backs off in fractions of a second, so that a run takes seconds).
 */
export function relayBehindAFaultProxy(
  name: string,
  { brokerPort, tenantPrefix, env }: { brokerPort: number; tenantPrefix: string; env: Record<string, string> },
): () => RelayBehindAProxy {
  let fixture: RelayBehindAProxy | undefined;
  let broker: TestBroker | undefined;
  const parts: Partial<RelayBehindAProxy> = {};

  beforeAll(async () => {
    parts.proxy = await KafkaFaultProxy.start(brokerPort);
    broker = new TestBroker(brokerPort, brokerPort + 1, parts.proxy.port);
    await broker.start();
    const { ordersUrl } = await privateDatabases(name);
    parts.outbox = await new OutboxDb(ordersUrl).init();
    parts.relay = await startApp('outbox-relay', { ORDERS_DATABASE_URL: ordersUrl, KAFKA_BROKERS: broker.brokers, ...FAST_RELAY, ...env });
    parts.read = new TopicReader(createKafka({ brokers: [broker.brokers], clientId: `${name}-e2e` }), (tenantId) =>
      tenantId.startsWith(tenantPrefix),
    );
    await parts.read.start();
    fixture = parts as RelayBehindAProxy;
  }, 180_000);
  afterAll(async () => {
    await parts.read?.stop();
    await parts.relay?.stop();
    await parts.outbox?.close();
    await parts.proxy?.stop();
    await broker?.destroy();
  });

  return () => {
    if (!fixture) throw new Error('relayBehindAFaultProxy: used before its beforeAll ran');
    return fixture;
  };
}

/**
 * Each key's events in the order their first copies reached Kafka (copies after an outage are allowed:
 * consumers dedupe), the keys whose first copies are out of order (with them), and how many
 * message-ids came more than once. `events` maps a message-id to its key
 * and its number within the key.
 */
export function firstCopiesByKey(
  messages: ReadMessage[],
  events: Map<string, { key: number; n: number }>,
): { order: Map<number, number[]>; disordered: [key: number, ns: number[]][]; duplicated: number } {
  const copies = new Map<string, number>();
  const order = new Map<number, number[]>();
  for (const message of messages) {
    const id = message.headers[Headers.messageId];
    copies.set(id, (copies.get(id) ?? 0) + 1);
    if (copies.get(id)! > 1) continue;
    const event = events.get(id)!;
    order.set(event.key, [...(order.get(event.key) ?? []), event.n]);
  }
  const disordered = [...order].filter(([, ns]) => ns.some((n, i) => i > 0 && n < ns[i - 1]));
  return { order, disordered, duplicated: [...copies.values()].filter((count) => count > 1).length };
}
