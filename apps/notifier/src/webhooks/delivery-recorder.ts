import { Injectable } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { canonicalTimestamp, Headers, orderEventSchemas, WebhookTypes } from '@app/contracts';
import { ConsumedEvent, ConsumerOutcome, EventHandler } from '@app/inbox';
import { Queryable, queryRows } from '@app/platform';
import { NotifierConfig } from '../config';
import { WebhookDispatcher } from './webhook-dispatcher.service';

/**
 * The consumer's half of a webhook: inside the inbox transaction (the libs/inbox consumer kit, batched),
 * each order event becomes a `pending` row of webhook_deliveries holding the exact body to POST. It
 * commits with the inbox row or not at all, and then the offsets commit: no call leaves the process
 * here, so a slow or dead receiver cannot hold the partition. The dispatcher (webhook-dispatcher.ts)
 * delivers it, woken as soon as a delivery is recorded. Other event types, and versions newer than this
 * consumer reads, are `skipped` by the kit. The body's `timestamp` is the `occurred-at` header in UTC
 * when it is an RFC 3339 timestamp (TIMESTAMP_RULE), else the event's own time: the receiver holds it to that rule.
 */
@Injectable()
export class DeliveryRecorder implements EventHandler<typeof orderEventSchemas> {
  private readonly url: string;

  constructor(
    config: ConfigService<NotifierConfig, true>,
    private readonly dispatcher: WebhookDispatcher,
  ) {
    this.url = config.get('WEBHOOK_URL', { infer: true });
  }

  async handle(db: Queryable, events: ConsumedEvent<typeof orderEventSchemas>[]): Promise<void> {
    const deliveries = events.map(({ type, messageId, event, message }) => ({
      messageId,
      tenantId: event.tenantId,
      orderId: event.orderId,
      eventType: type,
      body: JSON.stringify({
        type: WebhookTypes[type],
        // The header is whatever the producer wrote; the event's own time passed its schema's timestamp rule.
        timestamp: canonicalTimestamp(message.headers[Headers.occurredAt]) ?? ('placedAt' in event ? event.placedAt : event.cancelledAt),
        data: event,
      }),
    }));
    // One statement for the batch; the sequence follows the partition's order, which the dispatcher keeps per order.
    await queryRows(
      db,
      /* sql */ `
      INSERT INTO webhook_deliveries (message_id, tenant_id, order_id, event_type, url, payload, state, next_attempt_at)
      SELECT d.message_id, d.tenant_id, d.order_id, d.event_type, $1, d.payload, 'pending', now()
      FROM unnest($2::uuid[], $3::text[], $4::uuid[], $5::text[], $6::text[]) WITH ORDINALITY
           AS d(message_id, tenant_id, order_id, event_type, payload, n)
      ORDER BY d.n
      ON CONFLICT (message_id) DO NOTHING`,
      [
        this.url,
        deliveries.map((d) => d.messageId),
        deliveries.map((d) => d.tenantId),
        deliveries.map((d) => d.orderId),
        deliveries.map((d) => d.eventType),
        deliveries.map((d) => d.body),
      ],
    );
  }

  onOutcome(outcome: ConsumerOutcome): void {
    if (outcome === 'applied') this.dispatcher.wake();
  }
}
