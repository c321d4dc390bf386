import type { Response } from 'express';
import { Counter } from 'prom-client';
import { idempotentOperations } from '@app/contracts';
import { IdempotencyError, IdempotencyOutcome, IdempotentResponse } from '@app/idempotency';
import { logOnCompletion } from '@app/platform';

/** What became of an idempotent command: the log field `idempotencyOutcome` and the metric's `outcome` label. */
export type CommandOutcome = IdempotencyOutcome | 'conflict' | 'in-progress';

const OUTCOMES: CommandOutcome[] = ['created', 'replayed', 're-executed', 'conflict', 'in-progress'];

const requests = new Counter({
  name: 'idempotency_requests_total',
  help: 'Idempotent commands by operation and outcome: created, replayed, re-executed, conflict (422), in-progress (409)',
  labelNames: ['operation', 'outcome'],
});
// Every series exists from the start, so a rate() over a first conflict is not a gap.
for (const operation of idempotentOperations) for (const outcome of OUTCOMES) requests.inc({ operation, outcome }, 0);

/**
 * Runs an idempotent command, records its outcome (created, replayed, re-executed, conflict,
 * in-progress) on the request's log line and in `idempotency_requests_total`, with the outbox
 * message-ids it enqueued, and writes the response's status and headers. Returns the body for Nest.
 */
export async function respondIdempotently(
  res: Response,
  operation: string,
  run: () => Promise<IdempotentResponse>,
): Promise<unknown> {
  // `operation` is already on the log line: ApiKeyGuard assigns it from @RequiresOperation.
  let result: IdempotentResponse;
  try {
    result = await run();
  } catch (error) {
    if (error instanceof IdempotencyError) {
      record(res, operation, error.code === 'IDEMPOTENCY.KEY_REUSED' ? 'conflict' : 'in-progress');
    }
    throw error;
  }
  record(res, operation, result.outcome);
  if (result.messageIds.length) logOnCompletion(res, { messageIds: result.messageIds });
  res.status(result.response.status);
  res.set(result.response.headers);
  res.set('Idempotency-Expires', result.expiresAt.toUTCString());
  if (result.outcome === 'replayed') res.set('Idempotent-Replayed', 'true');
  return result.response.body;
}

function record(res: Response, operation: string, outcome: CommandOutcome): void {
  logOnCompletion(res, { idempotencyOutcome: outcome });
  requests.inc({ operation, outcome });
}
