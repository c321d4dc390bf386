import { randomUUID } from 'node:crypto';
import { Command, Option } from 'nest-commander';
import { DedicatedSession } from '@app/platform';
import { CliError, ExitCode } from '../cli-error';
import { OpsCommand } from '../ops-command';
import { OrdersDatabase } from '../orders-database.module';
import { duration } from '../output';
import { progress } from '../progress';
import { OutboxReplayService, ReplayPlan, ReplayRequest, ReplayRun, resumeHint } from './outbox-replay.service';
import { GuardVerdict } from './replay-guard';
import * as parse from './replay-options';
import { ReplayBound } from './replay-options';
import { SelectionCounts } from './replay-selection';

interface ReplayOptions extends ReplayRequest {
  rate?: number;
  json?: boolean;
}

/**
 * The operator's side of a replay: flags in, one summary out (text or one JSON line), warnings and the
 * guard's override on stderr, SIGINT/SIGTERM finishing the batch in flight (a second one exits at
 * once). The work itself is OutboxReplayService's.
 */
@Command({
  name: 'outbox:replay',
  description:
    'Re-publish already published outbox rows (original message-ids and headers, plus replay-id) after a broker lost data; ' +
    'refuses rows older than a consumer still deduplicates unless --force',
})
export class OutboxReplayCommand extends OpsCommand<ReplayOptions> {
  protected readonly jsonShape = '{"replayId","published","byTopic","byTenant","dryRun","forced",…}';

  constructor(
    private readonly db: OrdersDatabase,
    private readonly replays: OutboxReplayService,
  ) {
    super();
  }

  async run(_: string[], options: ReplayOptions): Promise<void> {
    checkUsage(options);
    // One session of its own: it holds the replay's advisory lock until the command ends, and the lock
    // goes with the connection (never back to the pool still held).
    const session = await DedicatedSession.open((await this.db.manager()).connection);
    try {
      const plan = await this.replays.plan(session.manager, options);
      this.warn(plan);
      if (options.dryRun || !plan.counts.total) {
        const finished = !options.dryRun && (await this.replays.finishIfEmpty(session.manager, plan));
        this.reportPlan(options, plan, finished);
        if (plan.guard?.verdict === 'refused') throw new CliError(plan.guard.reason!);
        return;
      }
      if (plan.guard?.verdict === 'refused') throw new CliError(plan.guard.reason!);
      const run = await this.publish(session, plan, options);
      this.reportRun(options, plan, run);
      if (run.end !== 'finished') {
        throw new CliError(
          `${run.end}: replay ${run.replayId} stopped after sequence ${plan.selection.afterSequence ?? '(none)'}; ${resumeHint(run.replayId)}`,
        );
      }
    } finally {
      await session.close();
    }
  }

  private async publish(session: DedicatedSession, plan: ReplayPlan, options: ReplayOptions): Promise<ReplayRun> {
    const replayId = plan.replayId ?? randomUUID();
    const stop = new AbortController();
    const onSignal = (signal: NodeJS.Signals) => {
      if (stop.signal.aborted) {
        process.stderr.write(
          `ops: ${signal} again: exiting now; the batch in flight is published again on resume; ${resumeHint(replayId)}\n`,
        );
        process.exit(ExitCode.failed);
      }
      stop.abort();
      process.stderr.write(`ops: ${signal}: finishing the batch in flight, then stopping (again to exit now)\n`);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    const bar = progress('outbox:replay', plan.counts.total, options);
    try {
      return await this.replays.publish(session.manager, plan, {
        replayId,
        rate: options.rate,
        signal: stop.signal,
        onTopicCreated: (topic) => process.stderr.write(`ops: created missing topic ${topic}\n`),
        onBatch: (n) => bar.increment(n),
      });
    } finally {
      bar.stop();
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
  }

  private warn(plan: ReplayPlan): void {
    for (const warning of plan.warnings) process.stderr.write(`ops: warning: ${warning}\n`);
    if (plan.guard?.verdict === 'forced') {
      process.stderr.write(
        `ops: WARNING: --force overrides the consumers' dedupe window: ${plan.guard.reason!.replace(/^refusing to replay: /, '')}\n`,
      );
    }
  }

  private reportPlan(options: ReplayOptions, plan: ReplayPlan, finished: boolean): void {
    const { counts, guard } = plan;
    this.report(
      options,
      {
        ...summary(plan, options),
        finished,
        selected: counts.total,
        published: 0,
        byTopic: counts.byTopic,
        byTenant: counts.byTenant,
        guard: guardSummary(guard),
        warnings: plan.warnings,
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
  }

  private reportRun(options: ReplayOptions, plan: ReplayPlan, run: ReplayRun): void {
    this.report(
      options,
      {
        ...summary(plan, options),
        replayId: run.replayId,
        finished: run.end === 'finished',
        selected: plan.counts.total,
        published: run.published.total,
        totalPublished: plan.publishedBefore + run.published.total,
        byTopic: run.published.byTopic,
        byTenant: run.published.byTenant,
        lastSequence: plan.selection.afterSequence,
        createdTopics: run.createdTopics,
        guard: guardSummary(plan.guard),
        warnings: plan.warnings,
      },
      () =>
        [
          `Replay ${run.replayId}: published ${run.published.total} of ${plan.counts.total} message(s); ${run.end === 'finished' ? 'finished' : 'NOT finished'}.`,
          ...countLines(run.published),
        ].join('\n'),
    );
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
}

function checkUsage(options: ReplayOptions): void {
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

function summary(plan: ReplayPlan, options: ReplayOptions) {
  return { replayId: plan.replayId, dryRun: options.dryRun ?? false, forced: plan.forced, resumed: plan.resumed };
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
