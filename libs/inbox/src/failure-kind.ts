import { QueryFailedError, QueryRunnerAlreadyReleasedError, QueryRunnerProviderAlreadyReleasedError } from 'typeorm';
import { isDatabaseUnreachable, thrownByStatement } from '@app/platform';
import { MalformedMessage } from './inbox-message';

/**
 * A handler's error that looks like a lost connection but did not come from a statement (on its
 * connection, through `queryRows`, or on a TypeORM manager): an HTTP client's ECONNREFUSED, say. That
 * is the outside world failing, and it is counted; taken for the database being unreachable it would
 * be waited out forever.
 */
export class OutsideFailure extends Error {
  constructor(readonly original: unknown) {
    super(original instanceof Error ? original.message : String(original));
    this.name = 'OutsideFailure';
  }
}

/** Wraps what a handler threw in `OutsideFailure` when it only looks like the database's trouble. */
export function fromHandler(error: unknown): unknown {
  const fromItsManager =
    thrownByStatement(error) ||
    error instanceof QueryFailedError ||
    error instanceof QueryRunnerAlreadyReleasedError ||
    error instanceof QueryRunnerProviderAlreadyReleasedError;
  return !fromItsManager && isDatabaseUnreachable(error) ? new OutsideFailure(error) : error;
}

/**
 * What a consumer does about a message's failure:
 * - `unreachable`: the database cannot be reached or serve any session; not the message's doing, so it
 *   waits and retries without counting an attempt.
 * - `malformed`: the message can never be handled as it is; dead-lettered at once.
 * - `counted`: anything else, a statement timeout or deadlock included; retried with backoff and
 *   dead-lettered after the bounded attempts.
 */
export type FailureKind = 'unreachable' | 'malformed' | 'counted';

export function failureKind(error: unknown): FailureKind {
  if (error instanceof MalformedMessage) return 'malformed';
  if (!(error instanceof OutsideFailure) && isDatabaseUnreachable(error)) return 'unreachable';
  return 'counted';
}
