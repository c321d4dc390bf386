import { DataSource } from 'typeorm';
import { CommandResult, IdempotentRequest, IdempotentResponse, runIdempotent } from '@app/idempotency';
import { inTransaction, Queryable, retryOnLostSession } from '@app/platform';
import { InjectedFault } from '../http/problem-catalog';
import { CommandContext } from './command-context';

/**
 * One idempotent command in one transaction: claim the scope, `execute`, store the response with the
 * command's events (runIdempotent), COMMIT. READ COMMITTED, PostgreSQL's default: the receipt's unique
 * key, not the isolation level, serialises duplicates. A lost session reruns the whole transaction:
 * the rerun decides again from what is committed (docs/idempotency.md).
 *
 * With fault injection on (tests and the demo only) and `X-Fault-Injection: before-commit`, the
 * command fails after its effect, its events and its receipt are written, before COMMIT (which then
 * goes alone, not with the receipt's statement): none of them may survive.
 */
export function runCommand(
  dataSource: DataSource,
  request: IdempotentRequest,
  context: CommandContext,
  execute: (db: Queryable, claim: { now: Date }) => Promise<CommandResult>,
): Promise<IdempotentResponse> {
  return retryOnLostSession(() =>
    inTransaction(
      dataSource,
      (db) => runIdempotent(db, request, execute),
      context.failBeforeCommit ? { beforeCommit: failUnlessReplayed } : {},
    ),
  );
}

function failUnlessReplayed(result: IdempotentResponse): void {
  if (result.outcome !== 'replayed') {
    throw new InjectedFault('failed after the effect, its events and the receipt were written, before COMMIT');
  }
}
