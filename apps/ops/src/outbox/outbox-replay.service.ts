import { Injectable } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { EntityManager } from 'typeorm';
import { queryRows } from '@app/platform';
import { CliError } from '../cli-error';
import { OpsConfig } from '../config';
import { ConsumerDatabases } from '../consumer-databases';
import { duration } from '../output';
import { checkGuard, GuardVerdict } from './replay-guard';
import { batchSize, ReplayBound } from './replay-options';
import { Pacer } from './replay-pacer';
import { ReplayPublisher } from './replay-publisher';
import { countSelection, nextBatch, ReplayFilters, ReplayRow, ReplaySelection, SelectionCounts, tally } from './replay-selection';
import { createReplay, findReplay, finishReplay, lockReplay, markForced, recordProgress } from './replay-store';

/** What an operator asked for: a new replay (a range and filters) or the rest of a stored one. */
export interface ReplayRequest {
  from?: ReplayBound;
  to?: ReplayBound;
  topic?: string;
  tenant?: string;
  aggregate?: string;
  resume?: string;
  force?: boolean;
  dryRun?: boolean;
}

/** What one run is about to do, before anything is published: the selection, its counts and the guard's verdict. */
export interface ReplayPlan {
  /** The stored replay being resumed; null for a new one (it gets its id when it starts publishing). */
  replayId: string | null;
  resumed: boolean;
  selection: ReplaySelection;
  counts: SelectionCounts;
  /** Null when nothing is selected (there is nothing to guard). */
  guard: GuardVerdict | null;
  /** Passed the guard by --force, now or when the stored replay started. */
  forced: boolean;
  storedForced: boolean;
  publishedBefore: number;
  /** Things the operator should know that do not stop the replay (the outbox retention). */
  warnings: string[];
}

export type ReplayEnd = 'finished' | 'interrupted' | 'stopped at the dedupe window';

export interface ReplayRun {
  replayId: string;
  end: ReplayEnd;
  published: SelectionCounts;
  createdTopics: string[];
}

export const resumeHint = (id: string) => `continue with: npm run ops -- outbox:replay --resume ${id}`;

/**
 * outbox:replay's work, apart from its flags and its output: plan (select and count, guard against
 * what the consumers forgot), then publish in batches, recording progress so that an interrupted
 * replay resumes where it stopped. `manager` is a session of the replay's own: it holds the replay's
 * advisory lock. See docs/replay.md.
 */
@Injectable()
export class OutboxReplayService {
  constructor(
    private readonly consumerDatabases: ConsumerDatabases,
    private readonly config: ConfigService<OpsConfig, true>,
  ) {}

  async plan(manager: EntityManager, request: ReplayRequest): Promise<ReplayPlan> {
    const start = request.resume ? await this.stored(manager, request.resume, request.dryRun) : await this.fresh(manager, request);
    const counts = await countSelection(manager, start.selection);
    const force = start.storedForced || !!request.force;
    const guard = counts.total ? await checkGuard(manager, await this.consumerDatabases.all(), start.selection, { force }) : null;
    return {
      ...start,
      counts,
      guard,
      forced: guard?.verdict === 'forced' || start.storedForced,
      warnings: this.outboxRetentionWarnings(start.selection),
    };
  }

  /** A resumed replay with nothing left to publish is finished. */
  async finishIfEmpty(manager: EntityManager, plan: ReplayPlan): Promise<boolean> {
    if (plan.counts.total || plan.replayId === null) return false;
    await finishReplay(manager, plan.replayId);
    return true;
  }

  /**
   * Publishes the plan's rows (the guard must have passed) in sequence order; each batch is recorded
   * only after Kafka acknowledged it, so a crash republishes at most one batch (duplicates the
   * consumers absorb). An aborted `signal` ends the run after the batch in flight.
   */
  async publish(
    manager: EntityManager,
    plan: ReplayPlan,
    {
      replayId,
      rate,
      signal,
      onTopicCreated,
      onBatch,
    }: {
      /** The plan's stored replay, or the id a new one is recorded under. */
      replayId: string;
      rate?: number;
      signal: AbortSignal;
      onTopicCreated?: (topic: string) => void;
      onBatch?: (n: number) => void;
    },
  ): Promise<ReplayRun> {
    if (plan.guard?.verdict === 'refused') throw new CliError(plan.guard.reason!);
    const publisher = await ReplayPublisher.connect({
      brokers: this.config.get('KAFKA_BROKERS', { infer: true }),
      partitions: this.config.get('KAFKA_TOPIC_PARTITIONS', { infer: true }),
      topics: Object.keys(plan.counts.byTopic),
    });
    try {
      publisher.createdTopics.forEach((topic) => onTopicCreated?.(topic));
      if (!plan.replayId) {
        await createReplay(manager, {
          id: replayId,
          filters: plan.selection,
          selectedAt: plan.selection.selectedAt,
          selected: plan.counts.total,
          forced: plan.forced,
        });
        await lockReplay(manager, replayId);
      } else if (plan.forced && !plan.storedForced) {
        await markForced(manager, replayId);
      }
      const published: SelectionCounts = { total: 0, byTopic: {}, byTenant: {} };
      const end = await this.publishBatches(manager, publisher, { replayId, plan, published, rate, signal, onBatch });
      return { replayId, end, published, createdTopics: publisher.createdTopics };
    } finally {
      await publisher.close();
    }
  }

  private async publishBatches(
    manager: EntityManager,
    publisher: ReplayPublisher,
    {
      replayId,
      plan,
      published,
      rate,
      signal,
      onBatch,
    }: {
      replayId: string;
      plan: ReplayPlan;
      published: SelectionCounts;
      rate?: number;
      signal: AbortSignal;
      onBatch?: (n: number) => void;
    },
  ): Promise<ReplayEnd> {
    const { selection, guard } = plan;
    const pacer = new Pacer(rate);
    const interrupt = () => pacer.interrupt();
    signal.addEventListener('abort', interrupt);
    const size = batchSize(rate);
    // A long replay must not cross a consumer's cut-off while it runs: re-checked per batch, on the database clock.
    const dbClockOffset = Date.now() - (await queryRows<{ now: Date }>(manager, /* sql */ `SELECT now() AS now`)).rows[0].now.getTime();
    const forgotten = (row: ReplayRow) =>
      guard?.verdict === 'ok' &&
      guard.smallestRetentionSeconds !== null &&
      row.created_at.getTime() < Date.now() - dbClockOffset - guard.smallestRetentionSeconds * 1000;
    try {
      for (;;) {
        if (signal.aborted) return 'interrupted';
        const rows = await nextBatch(manager, selection, size);
        if (!rows.length) break;
        if (rows.some(forgotten)) return 'stopped at the dedupe window';
        await pacer.before(rows.length);
        if (signal.aborted) return 'interrupted';
        try {
          await publisher.publish(rows, replayId);
        } catch (error) {
          throw new CliError(
            `publishing failed after ${published.total} message(s) (${(error as Error).message}); nothing was lost, ${resumeHint(replayId)}`,
          );
        }
        const last = rows[rows.length - 1].sequence;
        await recordProgress(manager, replayId, last, rows.length);
        selection.afterSequence = last;
        for (const row of rows) tally(published, row.topic, row.tenant_id);
        onBatch?.(rows.length);
      }
      await finishReplay(manager, replayId);
      return 'finished';
    } finally {
      signal.removeEventListener('abort', interrupt);
    }
  }

  /** A stored replay to continue: its filters, frozen range and progress. */
  private async stored(manager: EntityManager, replayId: string, dryRun?: boolean) {
    const stored = await findReplay(manager, replayId);
    if (!stored) throw new CliError(`no replay ${replayId} (outbox_replays)`);
    if (stored.finishedAt) {
      throw new CliError(
        `replay ${stored.id} finished at ${stored.finishedAt.toISOString()}; nothing to resume (start a new replay instead)`,
      );
    }
    if (!dryRun && !(await lockReplay(manager, stored.id))) throw new CliError(`replay ${stored.id} is running in another process`);
    return {
      replayId: stored.id,
      resumed: true,
      selection: stored.selection,
      storedForced: stored.forced,
      publishedBefore: stored.published,
    };
  }

  /** A new replay from the request's range and filters, its end frozen at the database's now. */
  private async fresh(manager: EntityManager, request: ReplayRequest) {
    const { rows } = await queryRows<{ now: Date }>(manager, /* sql */ `SELECT now() AS now`);
    const filters: ReplayFilters = {
      fromSequence: request.from && 'sequence' in request.from ? request.from.sequence : null,
      fromTime: request.from && 'time' in request.from ? request.from.time : null,
      toSequence: request.to && 'sequence' in request.to ? request.to.sequence : null,
      toTime: request.to && 'time' in request.to ? request.to.time : null,
      topic: request.topic ?? null,
      tenantId: request.tenant ?? null,
      messageKey: request.aggregate ?? null,
    };
    const selection: ReplaySelection = { ...filters, selectedAt: rows[0].now, afterSequence: null };
    return { replayId: null, resumed: false, selection, storedForced: false, publishedBefore: 0 };
  }

  private outboxRetentionWarnings({ fromTime, selectedAt }: ReplaySelection): string[] {
    const retention = this.config.get('OUTBOX_RETENTION_SECONDS', { infer: true });
    if (!fromTime || fromTime.getTime() >= selectedAt.getTime() - retention * 1000) return [];
    return [
      `--from ${fromTime.toISOString()} reaches back past OUTBOX_RETENTION_SECONDS (${duration(retention)}): rows published before ` +
        `${new Date(selectedAt.getTime() - retention * 1000).toISOString()} may already be deleted and cannot be replayed`,
    ];
  }
}
