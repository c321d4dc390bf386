import { randomUUID } from 'node:crypto';
import { Kafka, Producer } from 'kafkajs';
import { OrderEventTypes, Topics } from '@app/contracts';
import { RunningApp, startApp } from './apps';
import { FulfillmentDb } from './fulfillment-db';
import { OrderEventInput, produceOrderEvent, skipConsumerBacklog } from './kafka';

/** Bounded attempts and short retries, so a suite sees a message dead-lettered within seconds. */
export const FAST_RETRIES = {
  FULFILLMENT_MAX_ATTEMPTS: '3',
  FULFILLMENT_RETRY_MIN_MS: '50',
  FULFILLMENT_RETRY_MAX_MS: '200',
  KAFKA_SESSION_TIMEOUT_MS: '6000',
};

/**
 * A quantity that makes a valid OrderPlaced (a positive integer, so the consumer's schema reads it)
 * that fails every time in fulfillment's database (out of range for the shipments table's integer):
 * a poison message, retried and then dead-lettered with POISON_ERROR.
 */
export const POISON_QUANTITY = 3_000_000_000;
export const POISON_ERROR = /out of range for type integer/;

export interface PlacedOptions {
  orderId?: string;
  sku?: string;
  quantity?: number;
  /** Extra payload bytes, for a message larger than some topic accepts. */
  paddingBytes?: number;
}

/** An OrderPlaced as the relay publishes it (key = order id); POISON_QUANTITY fails in the database every time. */
export function orderPlaced(tenantId: string, options: PlacedOptions = {}): OrderEventInput & { messageId: string } {
  const orderId = options.orderId ?? randomUUID();
  const payload = {
    orderId,
    tenantId,
    sku: options.sku ?? 'SKU-1',
    quantity: options.quantity ?? 1,
    customerRef: null,
    placedAt: new Date().toISOString(),
    ...(options.paddingBytes ? { note: 'x'.repeat(options.paddingBytes) } : {}),
  };
  return { messageId: randomUUID(), type: OrderEventTypes.placed, tenantId, key: orderId, payload };
}

/** One sample of a Prometheus counter or gauge the app exposes (0 when it has none yet). */
export async function appMetric(app: RunningApp, name: string, labels = ''): Promise<number> {
  const text = await (await fetch(`${app.managementUrl}/metrics`)).text();
  const prefix = labels ? `${name}{${labels}} ` : `${name} `;
  const line = text.split('\n').find((l) => l.startsWith(prefix));
  return Number(line?.slice(prefix.length) ?? 0);
}

/**
 * Starts fulfillment at the end of the order-events topic (what other suites left there is not this
 * suite's business) and returns once its group consumes: a marker it produced is in the inbox.
 */
export async function startFulfillmentCaughtUp(
  kafka: Kafka,
  producer: Producer,
  db: FulfillmentDb,
  env: Record<string, string> = {},
): Promise<RunningApp> {
  await skipConsumerBacklog(kafka, ['fulfillment'], Topics.orderEvents);
  const app = await startApp('fulfillment', { ...FAST_RETRIES, ...env });
  const marker = await produceOrderEvent(producer, orderPlaced(`t-sync-${randomUUID().slice(0, 8)}`));
  await db.until(
    () => db.inbox(marker),
    (rows) => rows.length === 1,
    90_000,
  );
  return app;
}
