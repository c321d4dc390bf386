import { z } from 'zod';
import { orderCancelledV1Schema, orderPlacedV1Schema, OrderWebhook, timestampSchema } from '@app/contracts';

/**
 * The body of an order webhook (libs/contracts webhooks.ts), its `data` the event's payload as the
 * contracts define it (text without NUL or lone surrogates: they cannot be stored; timestamps in RFC 3339,
 * TIMESTAMP_RULE, not whatever Date.parse forgives). Fields this
 * receiver does not know are dropped rather than refused, so the sender can add fields.
 */
export const orderWebhookSchema = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('order.placed'),
    timestamp: timestampSchema,
    data: orderPlacedV1Schema,
  }),
  z.object({
    type: z.literal('order.cancelled'),
    timestamp: timestampSchema,
    data: orderCancelledV1Schema,
  }),
]) satisfies z.ZodType<OrderWebhook>;

export type ParsedWebhook =
  | { webhook: OrderWebhook }
  /** A type this receiver does not handle (one the sender added later): acknowledged, not stored. */
  | { unhandledType: string }
  /** Not a webhook body at all, or a known type with the wrong fields: answered 400. */
  | { problems: string[] };

const HANDLED_TYPES: readonly string[] = orderWebhookSchema.options.map((option) => option.shape.type.value);

/** Reads a verified body (never an unverified one: it is only now worth the parsing). */
export function parseOrderWebhook(rawBody: Buffer): ParsedWebhook {
  let json: unknown;
  try {
    json = JSON.parse(rawBody.toString('utf8'));
  } catch {
    return { problems: ['the body is not JSON'] };
  }
  const type = (json as { type?: unknown } | null)?.type;
  if (typeof type === 'string' && !HANDLED_TYPES.includes(type)) return { unhandledType: type };
  const result = orderWebhookSchema.safeParse(json);
  if (result.success) return { webhook: result.data };
  return { problems: result.error.issues.map((issue) => `${issue.path.join('.') || '(body)'}: ${issue.message}`) };
}
