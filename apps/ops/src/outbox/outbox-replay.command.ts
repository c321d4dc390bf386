import { randomUUID } from 'node:crypto';
import { ConfigService } from '@nestjs/config';
import { Command, CommandRunner, Option } from 'nest-commander';
import { EntityManager } from 'typeorm';
import { DedicatedSession, queryRows } from '@app/platform';
import { CliError, ExitCode } from '../cli-error';
import { OpsConfig } from '../config';
import { ConsumerDatabases } from '../consumer-databases';
import { OrdersDatabase } from '../orders-database.module';
import { duration, print } from '../output';
import { progress } from '../progress';
import { checkGuard, GuardVerdict } from './replay-guard';
import * as parse from './replay-options';
import { ReplayBound } from './replay-options';
import { Pacer } from './replay-pacer';
import { ReplayPublisher } from './replay-publisher';
import { countSelection, nextBatch, ReplayFilters, ReplayRow, ReplaySelection, SelectionCounts, tally } from './replay-selection';
import { createReplay, findReplay, finishReplay, lockReplay, markForced, recordProgress } from './replay-store';

interface ReplayOptions {
  from?: ReplayBound;
  to?: ReplayBound;
  topic?: string;
  tenant?: string;
  aggregate?: string;
  dryRun?: boolean;
  rate?: number;
  force?: boolean;
  resume?: string;
  json?: boolean;
}

/** What one run is about to do: a new replay, or the rest of a stored one. */
interface Plan {
  replayId: string | null;
  resumed: boolean;
  selection: ReplaySelection;
  /** May pass the guard: --force now, or the stored replay was forced already. */
  force: boolean;
  storedForced: boolean;
  publishedBefore: number;
}

const resumeHint = (id: string) => `continue with: npm run ops -- outbox:replay --resume ${id}`;

@Command({
  name: 'outbox:replay',
  description:
    'Re-publish already published outbox rows (original message-ids and headers, plus replay-id) after a broker lost data; ' +
    'refuses rows older than a consumer still deduplicates unless --force',
})
export class OutboxReplayCommand extends CommandRunner {
  constructor(
    private readonly db: OrdersDatabase,
    private readonly consumerDatabases: ConsumerDatabases,
    private readonly config: ConfigService<OpsConfig, true>,
  ) {
    super();
  }

  async run(args: string[], options: ReplayOptions): Promise<void> {
    checkUsage(args, options);
    const orders = await this.db.manager();
    // One session of its own: it holds the replay's advisory lock until the command ends, and the lock
    // goes with the connection (never back to the pool still held).
    const session = await DedicatedSession.open(orders.connection);
    try {
      await this.replay(session.manager, options);
    } finally {
      await session.close();
    }
  }

  private async replay(manager: EntityManager, options: ReplayOptions): Promise<void> {
    const plan = await this.plan(manager, options);
    const counts = await countSelection(manager, plan.selection);
    const warnings = this.outboxRetentionWarnings(plan.selection);
    const guard = counts.total
      ? await checkGuard(manager, await this.consumerDatabases.all(), plan.selection, { force: plan.force })
      : null;
    for (const warning of warnings) process.stderr.write(`ops: warning: ${warning}\n`);
    if (guard?.verdict === 'forced') {
      process.stderr.write(
        `ops: WARNING: --force overrides the consumers' dedupe window: ${guard.reason!.replace(/^refusing to replay: /, '')}\n`,
      );
    }
    const summary = {
      replayId: plan.replayId,
      dryRun: options.dryRun ?? false,
      forced: guard?.verdict === 'forced' || plan.storedForced,
      resumed: plan.resumed,
    };

    if (options.dryRun || !counts.total) {
      const finished = !counts.total && plan.replayId !== null && !options.dryRun;
      if (finished) await finishReplay(manager, plan.replayId!);
      print(
        options.json,
        {
          ...summary,
          finished,
          selected: counts.total,
          published: 0,
          byTopic: counts.byTopic,
          byTenant: counts.byTenant,
          guard: guardSummary(guard),
          warnings,
        },
        () =>
          [
            options.dryRun
              ? `Dry run: ${counts.total} published outbox row(s) selected; nothing published.`
              : 'Nothing to replay: no published outbox row matches.',
            ...countLines(counts),
            ...guardLines(guard),
          ].join('\n'),
      );
      if (guard?.verdict === 'refused') throw new CliError(guard.reason!);
      return;
    }
    if (guard?.verdict === 'refused') throw new CliError(guard.reason!);

    const publisher = await ReplayPublisher.connect({
      brokers: this.config.get('KAFKA_BROKERS', { infer: true }),
      partitions: this.config.get('KAFKA_TOPIC_PARTITIONS', { infer: true }),
      topics: Object.keys(counts.byTopic),
    });
    try {
      for (const topic of publisher.createdTopics) process.stderr.write(`ops: created missing topic ${topic}\n`);
      const replayId = plan.replayId ?? randomUUID();
      if (!plan.replayId) {
        await createReplay(manager, {
          id: replayId,
          filters: plan.selection,
          selectedAt: plan.selection.selectedAt,
          selected: counts.total,
          forced: summary.forced,
        });
        await lockReplay(manager, replayId);
      } else if (summary.forced && !plan.storedForced) {
        await markForced(manager, replayId);
      }
      const run = await this.publishAll(manager, publisher, { replayId, selection: plan.selection, total: counts.total, guard, options });
      const result = {
        ...summary,
        replayId,
        finished: run.end === 'finished',
        selected: counts.total,
        published: run.published.total,
        totalPublished: plan.publishedBefore + run.published.total,
        byTopic: run.published.byTopic,
        byTenant: run.published.byTenant,
        lastSequence: plan.selection.afterSequence,
        createdTopics: publisher.createdTopics,
        guard: guardSummary(guard),
        warnings,
      };
      print(options.json, result, () =>
        [
          `Replay ${replayId}: published ${run.published.total} of ${counts.total} message(s); ${run.end === 'finished' ? 'finished' : 'NOT finished'}.`,
          ...countLines(run.published),
        ].join('\n'),
      );
      if (run.end !== 'finished')
        throw new CliError(
          `${run.end}: replay ${replayId} stopped after sequence ${plan.selection.afterSequence ?? '(none)'}; ${resumeHint(replayId)}`,
        );
    } finally {
      await publisher.close();
    }
  }

  /** A new replay from the flags, or a stored one to continue (its filters, frozen range and progress). */
  private async plan(manager: EntityManager, options: ReplayOptions): Promise<Plan> {
    if (options.resume) {
      const stored = await findReplay(manager, options.resume);
      if (!stored) throw new CliError(`no replay ${options.resume} (outbox_replays)`);
      if (stored.finishedAt)
        throw new CliError(
          `replay ${stored.id} finished at ${stored.finishedAt.toISOString()}; nothing to resume (start a new replay instead)`,
        );
      if (!options.dryRun && !(await lockReplay(manager, stored.id)))
        throw new CliError(`replay ${stored.id} is running in another process`);
      return {
        replayId: stored.id,
        resumed: true,
        selection: stored.selection,
        force: stored.forced || !!options.force,
        storedForced: stored.forced,
        publishedBefore: stored.published,
      };
    }
    const { rows } = await queryRows<{ now: Date }>(manager, /* sql */ `SELECT now() AS now`);
    const filters: ReplayFilters = {
      fromSequence: options.from && 'sequence' in options.from ? options.from.sequence : null,
      fromTime: options.from && 'time' in options.from ? options.from.time : null,
      toSequence: options.to && 'sequence' in options.to ? options.to.sequence : null,
      toTime: options.to && 'time' in options.to ? options.to.time : null,
      topic: options.topic ?? null,
      tenantId: options.tenant ?? null,
      messageKey: options.aggregate ?? null,
    };
    return {
      replayId: null,
      resumed: false,
      selection: { ...filters, selectedAt: rows[0].now, afterSequence: null },
      force: !!options.force,
      storedForced: false,
      publishedBefore: 0,
    };
  }

  private outboxRetentionWarnings({ fromTime, selectedAt }: ReplaySelection): string[] {
    const retention = this.config.get('OUTBOX_RETENTION_SECONDS', { infer: true });
    if (!fromTime || fromTime.getTime() >= selectedAt.getTime() - retention * 1000) return [];
    return [
      `--from ${fromTime.toISOString()} reaches back past OUTBOX_RETENTION_SECONDS (${duration(retention)}): rows published before ` +
        `${new Date(selectedAt.getTime() - retention * 1000).toISOString()} may already be deleted and cannot be replayed`,
    ];
  }

  /**
   * Batches in sequence order; each batch is recorded only after Kafka acknowledged it, so a crash
   * republishes at most one batch (duplicates the consumers absorb). SIGINT/SIGTERM finish the batch
   * in flight; a second one exits at once.
   */
  private async publishAll(
    manager: EntityManager,
    publisher: ReplayPublisher,
    {
      replayId,
      selection,
      total,
      guard,
      options,
    }: { replayId: string; selection: ReplaySelection; total: number; guard: GuardVerdict | null; options: ReplayOptions },
  ): Promise<{ published: SelectionCounts; end: 'finished' | 'interrupted' | 'stopped at the dedupe window' }> {
    const published: SelectionCounts = { total: 0, byTopic: {}, byTenant: {} };
    const pacer = new Pacer(options.rate);
    const size = parse.batchSize(options.rate);
    // A long replay must not cross a consumer's cut-off while it runs: re-checked per batch, on the database clock.
    const dbClockOffset = Date.now() - (await queryRows<{ now: Date }>(manager, /* sql */ `SELECT now() AS now`)).rows[0].now.getTime();
    const forgotten = (row: ReplayRow) =>
      guard?.verdict === 'ok' &&
      guard.smallestRetentionSeconds !== null &&
      row.published_at.getTime() < Date.now() - dbClockOffset - guard.smallestRetentionSeconds * 1000;
    let stopping: NodeJS.Signals | undefined;
    const onSignal = (signal: NodeJS.Signals) => {
      if (stopping) {
        process.stderr.write(
          `ops: ${signal} again: exiting now; the batch in flight is published again on resume; ${resumeHint(replayId)}\n`,
        );
        process.exit(ExitCode.failed);
      }
      stopping = signal;
      pacer.interrupt();
      process.stderr.write(`ops: ${signal}: finishing the batch in flight, then stopping (again to exit now)\n`);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    const bar = progress('outbox:replay', total, options);
    try {
      for (;;) {
        if (stopping) return { published, end: 'interrupted' };
        const rows = await nextBatch(manager, selection, size);
        if (!rows.length) break;
        if (rows.some(forgotten)) return { published, end: 'stopped at the dedupe window' };
        await pacer.before(rows.length);
        if (stopping) return { published, end: 'interrupted' };
        try {
          await publisher.publish(rows, replayId);
        } catch (error) {
          bar.stop();
          throw new CliError(
            `publishing failed after ${published.total} message(s) (${(error as Error).message}); nothing was lost, ${resumeHint(replayId)}`,
          );
        }
        const last = rows[rows.length - 1].sequence;
        await recordProgress(manager, replayId, last, rows.length);
        selection.afterSequence = last;
        for (const row of rows) tally(published, row.topic, row.tenant_id);
        bar.increment(rows.length);
      }
      await finishReplay(manager, replayId);
      return { published, end: 'finished' };
    } finally {
      bar.stop();
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
  }

  @Option({
    flags: '--from <time|sequence>',
    description: 'first row: an outbox sequence, or an ISO 8601 time (with offset) compared with published_at',
  })
  parseFrom(value: string): ReplayBound {
    return parse.parseBound('--from', value);
  }

  @Option({ flags: '--to <time|sequence>', description: 'last row, inclusive (default: everything published when the replay starts)' })
  parseTo(value: string): ReplayBound {
    return parse.parseBound('--to', value);
  }

  @Option({ flags: '--topic <topic>', description: 'only this topic' })
  parseTopic(value: string): string {
    return parse.parseTopic(value);
  }

  @Option({ flags: '--tenant <id>', description: 'only this tenant' })
  parseTenant(value: string): string {
    return parse.parseText('--tenant', value);
  }

  @Option({ flags: '--aggregate <id>', description: 'only this aggregate (the Kafka message key, e.g. an order id, in any letter case)' })
  parseAggregate(value: string): string {
    return parse.parseAggregate(value);
  }

  @Option({ flags: '--dry-run', description: "print counts per topic and tenant and the guard's verdict; publish nothing" })
  parseDryRun(): boolean {
    return true;
  }

  @Option({ flags: '--rate <n>', description: 'at most n messages per second (default: as fast as Kafka acknowledges)' })
  parseRate(value: string): number {
    return parse.parseRate(value);
  }

  @Option({ flags: '--force', description: 'replay even rows older than a consumer still deduplicates (they apply again there)' })
  parseForce(): boolean {
    return true;
  }

  @Option({ flags: '--resume <replay-id>', description: 'continue an interrupted replay with its stored filters and range' })
  parseResume(value: string): string {
    return parse.parseReplayId(value);
  }

  @Option({ flags: '--json', description: 'print one JSON line: {"replayId","published","byTopic","byTenant","dryRun","forced",…}' })
  parseJson(): boolean {
    return true;
  }
}

function checkUsage(args: string[], options: ReplayOptions): void {
  if (args.length) throw new CliError(`outbox:replay takes no arguments (got "${args.join(' ')}")`, ExitCode.usage);
  if (options.resume) {
    const clashing = (['from', 'to', 'topic', 'tenant', 'aggregate'] as const).filter((flag) => options[flag] !== undefined);
    if (clashing.length) {
      throw new CliError(
        `--resume takes the stored range and filters; do not combine it with ${clashing.map((f) => `--${f}`).join(', ')}`,
        ExitCode.usage,
      );
    }
    return;
  }
  if (!options.from) throw new CliError('--from <ISO time|sequence> is required (or --resume <replay-id>)', ExitCode.usage);
  parse.checkRange(options.from, options.to);
}

function countLines(counts: SelectionCounts): string[] {
  return [
    ...Object.entries(counts.byTopic).map(([topic, n]) => `  topic   ${topic}  ${n}`),
    ...Object.entries(counts.byTenant).map(([tenant, n]) => `  tenant  ${tenant}  ${n}`),
  ];
}

function guardSummary(guard: GuardVerdict | null) {
  return guard
    ? { verdict: guard.verdict, consumers: guard.consumers, reason: guard.reason }
    : { verdict: 'ok', consumers: [], reason: null };
}

function guardLines(guard: GuardVerdict | null): string[] {
  if (!guard) return [];
  const consumers = guard.consumers.map(
    (c) => `${c.consumer} ${duration(c.retentionSeconds)}, cut-off ${c.cutoff}, ${c.pastRetention} past it`,
  );
  const verdict = {
    ok: 'ok, every consumer still remembers these message-ids',
    refused: 'REFUSED',
    forced: 'FORCED past the dedupe window',
  }[guard.verdict];
  return [`Guard: ${verdict}`, ...consumers.map((line) => `  consumer ${line}`)];
}
