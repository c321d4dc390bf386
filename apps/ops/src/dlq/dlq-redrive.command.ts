import { Command, Help, Option } from 'nest-commander';
import { canonicalUuid } from '@app/contracts';
import { CliError, ExitCode } from '../cli-error';
import { OpsCommand } from '../ops-command';
import { progress } from '../progress';
import { ALL_LIMIT, DeadLetterRedriveService, RedrivePlan } from './dead-letter-redrive.service';

interface RedriveOptions {
  all?: boolean;
  consumer?: string;
  dryRun?: boolean;
  json?: boolean;
}

interface RedriveReport {
  redriveId: string | null;
  dryRun: boolean;
  selected: { consumer: string; messageId: string; eventType: string | null; topic: string; redrivenAt: string | null }[];
  skipped: { consumer: string; messageId: string; reason: string }[];
}

@Command({
  name: 'dlq:redrive',
  arguments: '[messageIds...]',
  description: 'Publish dead letters again to their original topic, for their consumer to handle anew',
})
export class DlqRedriveCommand extends OpsCommand<RedriveOptions> {
  protected readonly jsonShape = '{redriveId, dryRun, selected: [...], skipped: [{consumer, messageId, reason}]}';

  constructor(private readonly redrives: DeadLetterRedriveService) {
    super();
  }

  async run(args: string[], options: RedriveOptions): Promise<void> {
    const messageIds = [...new Set(args.map((id) => canonicalUuid(id) ?? id))];
    if (messageIds.length && options.all) throw new CliError('name message-ids or give --all, not both', ExitCode.usage);
    if (!messageIds.length && !options.all)
      throw new CliError('name the message-ids to re-drive (see dlq:list), or give --all', ExitCode.usage);
    const malformed = messageIds.filter((id) => !canonicalUuid(id));
    if (malformed.length) throw new CliError(`not a message-id (UUID): ${malformed.join(', ')}`, ExitCode.usage);

    const plan = await this.redrives.plan({ messageIds, all: options.all, consumer: options.consumer });
    let run: { redriveId: string; failure?: string } | undefined;
    if (!options.dryRun) {
      const bar = progress('dlq:redrive', plan.selected.length, options);
      try {
        run = await this.redrives.redrive(plan, () => bar.increment());
      } finally {
        bar.stop();
      }
    }
    const report = toReport(plan, run?.redriveId ?? null, options.dryRun ?? false);
    this.report(options, report, () => describe(report));
    if (run?.failure) throw new CliError(run.failure);
  }

  @Option({ flags: '--all', description: `every dead letter not yet re-driven (at most ${ALL_LIMIT} per run)` })
  parseAll(): boolean {
    return true;
  }

  @Option({ flags: '-c, --consumer <name>', description: "only this consumer's dead letters" })
  parseConsumer(value: string): string {
    return value;
  }

  @Option({ flags: '--dry-run', description: 'show what would be re-driven; change nothing' })
  parseDryRun(): boolean {
    return true;
  }

  @Help('after')
  redriveNote(): string {
    return `
The message goes back to its original topic with its key, value and original headers (the same
message-id) plus redrive-id. Every consumer group on that topic receives it: the one that
dead-lettered it handles it anew, the others skip it as a duplicate by their inbox. Refused: a dead
letter already re-driven, one recorded without a usable message-id, and one older than another
consumer's inbox retention (that consumer may have forgotten it and would apply it again).
Exit codes: 0 done, 1 refused, not found or failed (a failed one stays re-drivable), 2 bad usage.
See docs/operator-cli.md.`;
  }
}

function toReport(plan: RedrivePlan, redriveId: string | null, dryRun: boolean): RedriveReport {
  return {
    redriveId,
    dryRun,
    selected: plan.selected.map(({ letter, redrivenAt }) => ({
      consumer: letter.consumer,
      messageId: letter.messageId,
      eventType: letter.eventType,
      topic: letter.topic,
      redrivenAt: redrivenAt?.toISOString() ?? null,
    })),
    skipped: plan.skipped,
  };
}

function describe(report: RedriveReport): string {
  const line = (s: RedriveReport['selected'][number]) => `  ${s.consumer}  ${s.messageId}  -> ${s.topic}`;
  const done = report.selected.filter((s) => s.redrivenAt);
  const lines = report.dryRun
    ? [`Would re-drive ${report.selected.length} dead letter(s) (dry run: nothing changed):`, ...report.selected.map(line)]
    : [`Re-drove ${done.length} dead letter(s) (redrive-id ${report.redriveId}):`, ...done.map(line)];
  if (report.skipped.length)
    lines.push(`Skipped ${report.skipped.length}:`, ...report.skipped.map((s) => `  ${s.consumer}  ${s.messageId}: ${s.reason}`));
  return lines.join('\n');
}
