import { Injectable } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { InjectDataSource } from '@nestjs/typeorm';
import { Counter } from 'prom-client';
import { DataSource } from 'typeorm';
import { idempotentOperations } from '@app/contracts';
import { CommandResult, IdempotentRequest, IdempotentResponse, ReplayCache, runDecided, runIdempotent } from '@app/idempotency';
import { inOneStatement, inTransaction, postgresPool, Queryable, retryOnLostSession, StatementLanes } from '@app/platform';
import { CommandApiConfig } from '../config';
import { InjectedFault } from '../http/problem-catalog';
import { CommandContext } from './command-context';

const cachedReplays = new Counter({
  name: 'idempotency_replay_cache_hits_total',
  help: 'Replays (and refusals of a reused key) answered from the receipts this process holds, without the database',
  labelNames: ['operation'],
});
for (const operation of idempotentOperations) cachedReplays.inc({ operation }, 0);

/** A command's work after its claim, in its transaction, told the transaction's now(). */
export type Execute = (db: Queryable, claim: { now: Date }) => Promise<CommandResult>;

/**
 * An idempotent command: `decide`, which gives its answer and writes, when nothing the database holds
 * can change them (then one statement claims the scope with them, one round trip); otherwise `execute`.
 * Neither is called for a retry answered from memory.
 */
export type Command = { decide: () => CommandResult } | { execute: Execute };

/**
 * Runs each idempotent command in one transaction: claim the scope, execute, store the response with
 * the command's events (runIdempotent), COMMIT; a decided command's claim, answer, effect and events
 * are one statement (runDecided), sent outside a transaction block (inOneStatement: PostgreSQL makes
 * it a transaction of its own, with no BEGIN and COMMIT to send and answer), and where it cannot
 * decide (the receipt expired, or was committed while it waited) nothing was written and the command
 * runs the general way in a new transaction. READ COMMITTED, PostgreSQL's default: the receipt's
 * unique key, not the isolation level, serialises duplicates. A lost session reruns the whole
 * transaction: the rerun decides again from what is committed (docs/idempotency.md). A retry whose
 * committed receipt this process holds (ReplayCache) is answered without the database.
 *
 * With fault injection on (tests and the demo only) and `X-Fault-Injection: before-commit`, the
 * command fails after its effect, its events and its receipt are written, before COMMIT (which then
 * goes alone, not with the receipt's statement): none of them may survive.
 */
@Injectable()
export class CommandRunner {
  private readonly replays: ReplayCache;
  /** Where decided statements go (none: each borrows a connection of its own, inOneStatement). */
  private readonly lanes?: StatementLanes;

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    config: ConfigService<CommandApiConfig, true>,
  ) {
    this.replays = new ReplayCache({
      entries: config.get('IDEMPOTENCY_REPLAY_CACHE_ENTRIES', { infer: true }),
      maxSeconds: config.get('IDEMPOTENCY_REPLAY_CACHE_SECONDS', { infer: true }),
    });
    const lanes = config.get('DATABASE_STATEMENT_LANES', { infer: true });
    if (lanes > 0) this.lanes = new StatementLanes(postgresPool(dataSource), lanes);
  }

  async run(request: IdempotentRequest, context: CommandContext, command: Command): Promise<IdempotentResponse> {
    const replayed = this.replayFromMemory(request);
    if (replayed) return replayed;
    const began = this.replays.now();
    let decided: IdempotentResponse | undefined;
    let execute: Execute;
    if ('decide' in command) {
      const answer = command.decide();
      decided = await this.oneStatement(context, (db) => runDecided(db, request, answer));
      execute = () => Promise.resolve(answer);
    } else {
      execute = command.execute;
    }
    // Not decided by its one statement (nothing was written): the general way, in a new transaction.
    const result = decided ?? (await this.transaction(context, (db) => runIdempotent(db, request, execute)));
    this.replays.remember(request, result, began);
    return result;
  }

  private transaction<T extends IdempotentResponse | undefined>(context: CommandContext, work: (db: Queryable) => Promise<T>): Promise<T> {
    const hooks = context.failBeforeCommit ? { beforeCommit: failUnlessReplayed } : {};
    return retryOnLostSession(() => inTransaction(this.dataSource, work, hooks));
  }

  /** runDecided's one statement, a transaction of its own; in a transaction block when a fault is injected before COMMIT. */
  private oneStatement(context: CommandContext, work: (db: Queryable) => Promise<IdempotentResponse | undefined>) {
    if (context.failBeforeCommit) return this.transaction(context, work);
    const lanes = this.lanes;
    return retryOnLostSession(() => (lanes ? lanes.run(work) : inOneStatement(this.dataSource, work)));
  }

  private replayFromMemory(request: IdempotentRequest): IdempotentResponse | undefined {
    try {
      const replayed = this.replays.replay(request);
      if (replayed) cachedReplays.inc({ operation: request.scope.operation });
      return replayed;
    } catch (refused) {
      cachedReplays.inc({ operation: request.scope.operation });
      throw refused;
    }
  }
}

function failUnlessReplayed(result: IdempotentResponse | undefined): void {
  if (result && result.outcome !== 'replayed') {
    throw new InjectedFault('failed after the effect, its events and the receipt were written, before COMMIT');
  }
}
