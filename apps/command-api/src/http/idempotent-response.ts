import type { Response } from 'express';
import { PinoLogger } from 'nestjs-pino';
import { IdempotencyError, IdempotentResponse } from '@app/idempotency';

/**
 * Runs an idempotent command, logs its outcome (created, replayed, re-executed, conflict, in-progress)
 * on the request's log line, and writes the response's status and headers. Returns the body for Nest.
 */
export async function respondIdempotently(
  res: Response,
  logger: PinoLogger,
  operation: string,
  run: () => Promise<IdempotentResponse>,
): Promise<unknown> {
  logger.assign({ operation });
  let result: IdempotentResponse;
  try {
    result = await run();
  } catch (error) {
    if (error instanceof IdempotencyError) {
      logger.assign({ idempotencyOutcome: error.code === 'IDEMPOTENCY.KEY_REUSED' ? 'conflict' : 'in-progress' });
    }
    throw error;
  }
  logger.assign({ idempotencyOutcome: result.outcome });
  res.status(result.response.status);
  res.set(result.response.headers);
  res.set('Idempotency-Expires', result.expiresAt.toUTCString());
  if (result.outcome === 'replayed') res.set('Idempotent-Replayed', 'true');
  return result.response.body;
}
