import { EntityManager } from 'typeorm';
import { Headers, ORDER_EVENT_VERSION, orderEventSchemas, OrderEventType, WebhookTypes } from '@app/contracts';
import { HandlerOutcome, InboxHandler, InboxMessage, MalformedMessage } from '@app/inbox';
import { queryRows } from '@app/platform';

/** Whether the notifier sends a webhook for this message: an order event of a version it reads. */
export function isWebhookEvent(message: InboxMessage): boolean {
  const version = Number(message.headers[Headers.eventVersion] ?? '1');
  return message.eventType !== undefined && message.eventType in orderEventSchemas && version <= ORDER_EVENT_VERSION;
}

/**
 * The consumer's half of a webhook: inside the inbox transaction (libs/inbox processOnce, batched),
 * an order event becomes a `pending` row of webhook_deliveries holding the exact body to POST. It
 * commits with the inbox row or not at all, and then the offsets commit: no call leaves the process
 * here, so a slow or dead receiver cannot hold the partition. The dispatcher (webhook-dispatcher.ts)
 * delivers it. Other event types, and versions newer than this consumer reads, are `skipped`.
 */
export function deliveryRecorder(url: string): InboxHandler {
  return async (manager: EntityManager, message: InboxMessage): Promise<HandlerOutcome> => {
    if (!isWebhookEvent(message)) return 'skipped';
    const eventType = message.eventType as OrderEventType;
    const data = parsePayload(eventType, message);
    const body = JSON.stringify({
      type: WebhookTypes[eventType],
      timestamp: message.headers[Headers.occurredAt] ?? ('placedAt' in data ? data.placedAt : data.cancelledAt),
      data,
    });
    await queryRows(
      manager,
      /* sql */ `
      INSERT INTO webhook_deliveries (message_id, tenant_id, order_id, event_type, url, payload, state, next_attempt_at)
      VALUES ($1, $2, $3, $4, $5, $6, 'pending', now())
      ON CONFLICT (message_id) DO NOTHING`,
      [message.messageId, data.tenantId, data.orderId, eventType, url, body],
    );
    return 'applied';
  };
}

/** The payload of `eventType`, its tenant agreeing with the `tenant-id` header; otherwise malformed (dead-lettered). */
function parsePayload(eventType: OrderEventType, message: InboxMessage) {
  let json: unknown;
  try {
    json = JSON.parse(message.value ?? '');
  } catch {
    throw new MalformedMessage('payload is not JSON');
  }
  const parsed = orderEventSchemas[eventType].safeParse(json);
  if (!parsed.success) {
    throw new MalformedMessage(`payload is not a ${eventType}: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'payload'} ${i.message}`).join('; ')}`);
  }
  if (parsed.data.tenantId !== message.headers[Headers.tenantId]) {
    throw new MalformedMessage(`payload tenant ${parsed.data.tenantId} does not match the tenant-id header`);
  }
  return parsed.data;
}
