import type { Response } from 'express';
import { Counter } from 'prom-client';
import { idempotentOperations, Operations } from '@app/contracts';
import { IdempotencyError, IdempotencyErrorCode, IdempotencyOutcome, IdempotentResponse } from '@app/idempotency';
import { logOnCompletion } from '@app/platform';
import type { AuthenticatedClient } from '../auth/api-client-cache';

/** What became of an idempotent command: the log field `idempotencyOutcome` and the metric's `outcome` label. */
export type CommandOutcome = IdempotencyOutcome | 'conflict' | 'in-progress' | 'expired';

const OUTCOMES: CommandOutcome[] = ['created', 'replayed', 're-executed', 'conflict', 'in-progress', 'expired'];

/** The outcome each refusal of the receipt store stands for. */
const REFUSALS: Record<IdempotencyErrorCode, CommandOutcome> = {
  'IDEMPOTENCY.KEY_REUSED': 'conflict',
  'IDEMPOTENCY.IN_PROGRESS': 'in-progress',
  'IDEMPOTENCY.KEY_EXPIRED': 'expired',
};

const requests = new Counter({
  name: 'idempotency_requests_total',
  help:
    'Idempotent commands by operation and outcome: created, replayed, re-executed, conflict (422), in-progress (409), ' +
    'expired (422: refused by a tombstone)',
  labelNames: ['operation', 'outcome'],
});
// Every series exists from the start, so a rate() over a first conflict is not a gap.
for (const operation of idempotentOperations) for (const outcome of OUTCOMES) requests.inc({ operation, outcome }, 0);

/**
 * Fields of stored answers that describe another order: only a client allowed `orders.read` sees
 * them. The receipt keeps the answer whole (the scope is the tenant: a reader replaying the key sees
 * them), and each answer, first or replayed, is cut to what its caller may read.
 */
const READER_ONLY_FIELDS: Record<string, string> = { 'ORDER.CUSTOMER_REF_USED': 'orderId', 'ORDER.ALREADY_CANCELLED': 'order' };

export function visibleTo(client: AuthenticatedClient, body: unknown): unknown {
  if (client.allowedOperations.includes(Operations.readOrders) || body === null || typeof body !== 'object') return body;
  const field = READER_ONLY_FIELDS[String((body as { code?: unknown }).code)];
  if (!field || !(field in body)) return body;
  const { [field]: _hidden, ...visible } = body as Record<string, unknown>;
  return visible;
}

/**
 * Runs an idempotent command, records its outcome (created, replayed, re-executed, conflict,
 * in-progress, expired) on the request's log line and in `idempotency_requests_total`, with the outbox
 * message-ids it enqueued, and writes the response's status and headers. Returns the body for Nest,
 * as much of it as `client` may see.
 */
export async function respondIdempotently(
  res: Response,
  client: AuthenticatedClient,
  operation: string,
  run: () => Promise<IdempotentResponse>,
): Promise<unknown> {
  // `operation` is already on the log line: ApiKeyGuard assigns it from @RequiresOperation.
  let result: IdempotentResponse;
  try {
    result = await run();
  } catch (error) {
    if (error instanceof IdempotencyError) record(res, operation, REFUSALS[error.code]);
    throw error;
  }
  record(res, operation, result.outcome);
  if (result.messageIds.length) logOnCompletion(res, { messageIds: result.messageIds });
  res.status(result.response.status);
  res.set(result.response.headers);
  res.set('Idempotency-Expires', result.expiresAt.toUTCString());
  if (result.outcome === 'replayed') res.set('Idempotent-Replayed', 'true');
  return visibleTo(client, result.response.body);
}

function record(res: Response, operation: string, outcome: CommandOutcome): void {
  logOnCompletion(res, { idempotencyOutcome: outcome });
  requests.inc({ operation, outcome });
}
