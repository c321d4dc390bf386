import { randomBytes, randomUUID } from 'node:crypto';
import { Pool } from 'pg';
import { Webhook } from 'standardwebhooks';
import { OrderWebhook, WebhookHeaders } from '@app/contracts';
import { http, HttpResult } from './http';
import { testEnv } from './test-env';

/** A fresh Standard Webhooks secret (`whsec_` + 32 random bytes). */
export function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

export interface Delivery {
  id: string;
  /** When it was signed; `webhook-timestamp` is this in unix seconds. */
  at: Date;
  body: string;
  tenantId: string;
  orderId: string;
}

/** An order.placed webhook as the notifier sends it, for a tenant and order of its own. */
export function orderPlacedDelivery(at = new Date()): Delivery {
  const tenantId = `t-${randomUUID()}`;
  const orderId = randomUUID();
  const webhook: OrderWebhook = {
    type: 'order.placed',
    timestamp: at.toISOString(),
    data: { orderId, tenantId, sku: 'SKU-7', quantity: 3, customerRef: null, placedAt: at.toISOString() },
  };
  return { id: randomUUID(), at, body: JSON.stringify(webhook), tenantId, orderId };
}

/** The headers the notifier sends, signed with each of `secrets` (two during a rotation). */
export function signedHeaders(delivery: Pick<Delivery, 'id' | 'at' | 'body'>, secrets: string[]): Record<string, string> {
  return {
    'content-type': 'application/json',
    [WebhookHeaders.id]: delivery.id,
    [WebhookHeaders.timestamp]: String(Math.floor(delivery.at.getTime() / 1000)),
    [WebhookHeaders.signature]: secrets.map((secret) => new Webhook(secret).sign(delivery.id, delivery.at, delivery.body)).join(' '),
    [WebhookHeaders.idempotencyKey]: delivery.id,
  };
}

export function postWebhook(receiverUrl: string, headers: Record<string, string>, body: string | Buffer): Promise<HttpResult> {
  return http(`${receiverUrl}/webhooks/orders`, { method: 'POST', headers, body });
}

/** Direct reads of the receiver's database (webhook_receiver_test). */
export class ReceiverDb {
  readonly pool = new Pool({ connectionString: testEnv.receiverUrl, max: 2 });

  async rowsForOrder(
    orderId: string,
  ): Promise<{ webhook_id: string; event_type: string; tenant_id: string; payload: OrderWebhook; signed_at: Date }[]> {
    const { rows } = await this.pool.query(
      'SELECT webhook_id, event_type, tenant_id, payload, signed_at FROM received_webhooks WHERE order_id = $1',
      [orderId],
    );
    return rows;
  }

  /** Every row: a refused request must store nothing anywhere (a mutated body may name another order). */
  async total(): Promise<number> {
    const { rows } = await this.pool.query('SELECT count(*)::int AS n FROM received_webhooks');
    return rows[0].n;
  }

  close(): Promise<void> {
    return this.pool.end();
  }
}
