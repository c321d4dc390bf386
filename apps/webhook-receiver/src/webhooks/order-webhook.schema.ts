import { z } from 'zod';
import { canonicalUuid, OrderWebhook } from '@app/contracts';

// A lone UTF-16 surrogate or a NUL, which JSON escapes can carry, cannot be stored as jsonb text.
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const text = z.string().refine((value) => !UNSTORABLE.test(value), 'must be Unicode text without NUL characters');
const uuid = z.string().transform((value, ctx) => canonicalUuid(value) ?? (ctx.addIssue({ code: 'custom', message: 'must be a UUID' }), z.NEVER));
const timestamp = z.string().refine((value) => !Number.isNaN(Date.parse(value)), 'must be an ISO 8601 timestamp');

/**
 * The body of an order webhook (libs/contracts webhooks.ts). Fields this receiver does not know are
 * dropped rather than refused, so the sender can add fields without breaking its receivers.
 */
export const orderWebhookSchema = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('order.placed'),
    timestamp,
    data: z.object({
      orderId: uuid,
      tenantId: text.min(1),
      sku: text,
      quantity: z.number().int().positive(),
      customerRef: text.nullable(),
      placedAt: timestamp,
    }),
  }),
  z.object({
    type: z.literal('order.cancelled'),
    timestamp,
    data: z.object({ orderId: uuid, tenantId: text.min(1), reason: text, cancelledAt: timestamp }),
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
