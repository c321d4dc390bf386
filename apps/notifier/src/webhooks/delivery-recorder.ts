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
 * each order event becomes a `pending` row of webhook_deliveries holding the exact body to POST. It
 * commits with the inbox row or not at all, and then the offsets commit: no call leaves the process
 * here, so a slow or dead receiver cannot hold the partition. The dispatcher (webhook-dispatcher.ts)
 * delivers it. Other event types, and versions newer than this consumer reads, are `skipped`.
 */
export function deliveryRecorder(url: string): InboxHandler {
  return async (manager: EntityManager, messages: InboxMessage[]): Promise<HandlerOutcome[]> => {
    const deliveries = messages.filter(isWebhookEvent).map((message) => {
      const eventType = message.eventType as OrderEventType;
      const data = parsePayload(eventType, message);
      const body = JSON.stringify({
        type: WebhookTypes[eventType],
        timestamp: message.headers[Headers.occurredAt] ?? ('placedAt' in data ? data.placedAt : data.cancelledAt),
        data,
      });
      return { messageId: message.messageId, tenantId: data.tenantId, orderId: data.orderId, eventType, body };
    });
    if (deliveries.length) {
      // One statement for the batch; the sequence follows the partition's order, which the dispatcher keeps per order.
      await queryRows(
        manager,
        /* sql */ `
        INSERT INTO webhook_deliveries (message_id, tenant_id, order_id, event_type, url, payload, state, next_attempt_at)
        SELECT d.message_id, d.tenant_id, d.order_id, d.event_type, $1, d.payload, 'pending', now()
        FROM unnest($2::uuid[], $3::text[], $4::uuid[], $5::text[], $6::text[]) WITH ORDINALITY
             AS d(message_id, tenant_id, order_id, event_type, payload, n)
        ORDER BY d.n
        ON CONFLICT (message_id) DO NOTHING`,
        [
          url,
          deliveries.map((d) => d.messageId),
          deliveries.map((d) => d.tenantId),
          deliveries.map((d) => d.orderId),
          deliveries.map((d) => d.eventType),
          deliveries.map((d) => d.body),
        ],
      );
    }
    return messages.map((message) => (isWebhookEvent(message) ? 'applied' : 'skipped'));
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
