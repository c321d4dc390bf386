import { OrderCancelledV1, OrderEventType, OrderEventTypes, OrderPlacedV1 } from './order-events';

/**
 * The webhook contract (docs/notifier.md), per the Standard Webhooks specification
 * (https://www.standardwebhooks.com): a JSON body `{type, timestamp, data}` POSTed with these headers.
 * The signature covers `<webhook-id>.<webhook-timestamp>.<body>`, the exact bytes sent.
 */
export const WebhookHeaders = {
  /** The event's message-id: the same on every attempt, the receiver's dedupe key. */
  id: 'webhook-id',
  /** Unix seconds when this attempt was signed; receivers refuse one outside their tolerance (a replay). */
  timestamp: 'webhook-timestamp',
  /** Space-separated `v1,<base64 HMAC-SHA256>`, one per secret in use (two during a rotation). */
  signature: 'webhook-signature',
  /** The webhook-id again, for receivers built around the IETF Idempotency-Key header. */
  idempotencyKey: 'idempotency-key',
} as const;

/** The webhook `type` of each order event type (dotted lower case, as payment providers name them). */
export const WebhookTypes: Record<OrderEventType, string> = {
  [OrderEventTypes.placed]: 'order.placed',
  [OrderEventTypes.cancelled]: 'order.cancelled',
};

export type OrderWebhook =
  { type: 'order.placed'; timestamp: string; data: OrderPlacedV1 } | { type: 'order.cancelled'; timestamp: string; data: OrderCancelledV1 };

/**
 * The secret the notifier signs with and the reference receiver accepts when none is configured:
 * public (it is in this repository), so both refuse to boot with it in production.
 */
export const DEVELOPMENT_WEBHOOK_SECRET = 'whsec_ZGV2ZWxvcG1lbnQtb25seS13ZWJob29rLXNlY3JldCE=';

const SECRET_PREFIX = 'whsec_';

/**
 * Reads one or more Standard Webhooks secrets (`whsec_` + base64 of 24 to 64 random bytes), separated
 * by spaces or commas: several during a rotation.
 */
export function parseWebhookSecrets(value: string): { secrets: string[] } | { problem: string } {
  const secrets = value.split(/[\s,]+/).filter(Boolean);
  if (secrets.length === 0) return { problem: 'must list at least one whsec_ secret' };
  for (const [index, secret] of secrets.entries()) {
    const which = secrets.length > 1 ? `secret ${index + 1}: ` : '';
    if (!secret.startsWith(SECRET_PREFIX)) return { problem: `${which}must start with whsec_ (a Standard Webhooks secret)` };
    const encoded = secret.slice(SECRET_PREFIX.length);
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded) || encoded.length % 4 !== 0)
      return { problem: `${which}must be whsec_ followed by base64` };
    const bytes = Buffer.from(encoded, 'base64').length;
    if (bytes < 24 || bytes > 64) return { problem: `${which}must hold 24 to 64 bytes of key (this one has ${bytes})` };
  }
  return { secrets };
}
