import { EntityManager } from 'typeorm';
import { canonicalUuid, Headers, ORDER_EVENT_VERSION, OrderEventTypes, OrderPlacedV1 } from '@app/contracts';
import { HandlerOutcome, InboxHandler, InboxMessage, MalformedMessage } from '@app/inbox';
import { queryRows } from '@app/platform';

/** What one POST came to, for metrics: `2xx`, `4xx`, `5xx` (by status class), `timeout` or `error` (no answer). */
export type AttemptResult = '2xx' | '3xx' | '4xx' | '5xx' | 'timeout' | 'error';

export interface WebhookHandlerOptions {
  url: string;
  timeoutMs: number;
  /** Counts one POST for `messageId` and returns how many this process has made for it, this one included. */
  countAttempt: (messageId: string) => number;
  onAttempt?: (result: AttemptResult) => void;
}

/** A receiver that is overloaded or asks for patience: retried like a 5xx, although 4xx. */
const RETRYABLE_4XX = new Set([408, 429]);

/** Whether the handler would POST a webhook for this message (an OrderPlaced of a version it reads). */
export function callsOut(message: InboxMessage): boolean {
  const version = Number(message.headers[Headers.eventVersion] ?? '1');
  return message.eventType === OrderEventTypes.placed && version <= ORDER_EVENT_VERSION;
}

/**
 * OrderPlaced -> one webhook POST with `Idempotency-Key: <message-id>`, inside the inbox transaction
 * (libs/inbox processOnce, one such message per transaction: see `callsOut`). The delivery row is written only after a
 * 2xx, so it commits together with the inbox row or not at all.
 *
 * - 2xx: recorded, `applied`.
 * - 5xx, 408, 429, a timeout or no answer: a plain error, so the inbox consumer retries with backoff
 *   and dead-letters after NOTIFIER_MAX_ATTEMPTS. Every retry carries the same key.
 * - any other 4xx (and a 3xx, redirects are not followed): the receiver refused this request as it
 *   is, and sending it again will not change that: `MalformedMessage`, dead-lettered at once.
 * - other event types, and versions newer than this consumer reads: `skipped`, no call.
 */
export function webhookHandler(options: WebhookHandlerOptions): InboxHandler {
  return async (manager: EntityManager, message: InboxMessage): Promise<HandlerOutcome> => {
    if (!callsOut(message)) return 'skipped';

    const placed = parsePlaced(message);
    const messageId = message.messageId!;
    const attempts = options.countAttempt(messageId);
    const body = JSON.stringify({ ...placed, eventType: message.eventType, messageId });

    let response: Response;
    try {
      response = await fetch(options.url, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'Idempotency-Key': messageId },
        body,
        redirect: 'manual',
        signal: AbortSignal.timeout(options.timeoutMs),
      });
      // Drain the body so the connection can be reused; its content does not matter.
      await response.arrayBuffer().catch(() => undefined);
    } catch (error) {
      const timedOut = (error as Error).name === 'TimeoutError';
      options.onAttempt?.(timedOut ? 'timeout' : 'error');
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      throw new Error(
        timedOut
          ? `webhook POST timed out after ${options.timeoutMs} ms`
          : `webhook POST failed: ${cause?.code ?? cause?.message ?? (error as Error).message}`,
      );
    }

    const status = response.status;
    options.onAttempt?.(`${Math.floor(status / 100)}xx` as AttemptResult);
    if (status >= 200 && status < 300) {
      await queryRows(
        manager,
        /* sql */ `
        INSERT INTO webhook_deliveries (message_id, tenant_id, order_id, url, status_code, attempts)
        VALUES ($1, $2, $3, $4, $5, $6)`,
        [messageId, placed.tenantId, placed.orderId, options.url, status, attempts],
      );
      return 'applied';
    }
    if (status >= 500 || RETRYABLE_4XX.has(status)) throw new Error(`webhook answered ${status}`);
    throw new MalformedMessage(`webhook answered ${status}; not retried`);
  };
}

/** The payload as OrderPlacedV1, its tenant agreeing with the `tenant-id` header; otherwise malformed. */
function parsePlaced(message: InboxMessage): OrderPlacedV1 {
  let payload: unknown;
  try {
    payload = JSON.parse(message.value ?? '');
  } catch {
    throw new MalformedMessage('payload is not JSON');
  }
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
    throw new MalformedMessage('payload is not a JSON object');
  }
  const placed = payload as Partial<OrderPlacedV1>;
  if (typeof placed.tenantId !== 'string' || placed.tenantId !== message.headers[Headers.tenantId]) {
    throw new MalformedMessage(`payload tenant ${String(placed.tenantId)} does not match the tenant-id header`);
  }
  const orderId = canonicalUuid(placed.orderId);
  if (!orderId) throw new MalformedMessage('payload.orderId must be a UUID');
  return { ...(placed as OrderPlacedV1), orderId };
}
