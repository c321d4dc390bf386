import { z } from 'zod';
import { canonicalUuid } from './ids';
import { ORDER_EVENT_VERSION, OrderCancelledV1, OrderEventType, OrderEventTypes, OrderPlacedV1 } from './order-events';
import { isAcceptableText, TEXT_RULE } from './text';
import { timestampSchema } from './timestamps';

const uuid = z
  .string()
  .transform((value, ctx) => canonicalUuid(value) ?? (ctx.addIssue({ code: 'custom', message: 'must be a UUID' }), z.NEVER));
const text = z.string().refine(isAcceptableText, TEXT_RULE);

/**
 * The payloads of the order events (version 1), as a reader checks them: the Kafka consumers and the
 * webhook receiver. Fields a reader does not know are dropped, not refused, so a producer can add fields.
 */
export const orderPlacedV1Schema = z.object({
  orderId: uuid,
  tenantId: text.min(1),
  sku: text,
  quantity: z.number().int().positive(),
  customerRef: text.nullable(),
  placedAt: timestampSchema,
}) satisfies z.ZodType<OrderPlacedV1>;

export const orderCancelledV1Schema = z.object({
  orderId: uuid,
  tenantId: text.min(1),
  reason: text,
  cancelledAt: timestampSchema,
}) satisfies z.ZodType<OrderCancelledV1>;

export const orderEventSchemas = {
  [OrderEventTypes.placed]: orderPlacedV1Schema,
  [OrderEventTypes.cancelled]: orderCancelledV1Schema,
} satisfies Record<OrderEventType, z.ZodType>;

/** What a consumer of the order events topic reads (libs/inbox readEvent): each type's schema, and the newest version it understands. */
export const orderEventContract = { schemas: orderEventSchemas, version: ORDER_EVENT_VERSION };
