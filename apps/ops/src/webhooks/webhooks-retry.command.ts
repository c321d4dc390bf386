import { Command, Help, Option } from 'nest-commander';
import { ConsumerDatabases } from '../consumer-databases';
import { lockDead, lockDeliveries, retryDeliveries } from './webhook-deliveries';
import { parseTenant, RetryOptions, retrySelection } from './webhook-options';
import { planRetry, Refusal } from './webhook-plan';
import { OpsCommand } from '../ops-command';

/** --all-dead takes at most this many per run; run it again for the rest. */
const ALL_LIMIT = 10_000;

interface RetryReport {
  dryRun: boolean;
  selected: {
    messageId: string;
    tenant: string;
    order: string;
    eventType: string;
    from: string;
    attempts: number;
    nextAttemptAt: string | null;
  }[];
  skipped: Refusal[];
}

@Command({
  name: 'webhooks:retry',
  arguments: '[messageIds...]',
  description: 'Make webhook deliveries due now: a dead one pending again with a fresh retry schedule, a pending one without its wait',
})
export class WebhooksRetryCommand extends OpsCommand<RetryOptions> {
  protected readonly jsonShape =
    '{dryRun, selected: [{messageId, tenant, order, eventType, from, attempts, nextAttemptAt}], skipped: [{messageId, reason}]}';

  constructor(private readonly databases: ConsumerDatabases) {
    super();
  }

  async run(args: string[], options: RetryOptions): Promise<void> {
    const selection = retrySelection(args, options);
    const { manager } = await this.databases.get('notifier');
    // One transaction: the rows are locked while judged and changed, and a refusal or an unknown id rolls everything back.
    const report = await manager.transaction(async (tx): Promise<RetryReport> => {
      const rows =
        'messageIds' in selection ? await lockDeliveries(tx, selection.messageIds) : await lockDead(tx, selection.tenant, ALL_LIMIT);
      const plan = planRetry(rows, selection);
      const due = options.dryRun
        ? new Map<string, Date>()
        : await retryDeliveries(
            tx,
            plan.change.map((row) => row.messageId),
          );
      return {
        dryRun: options.dryRun ?? false,
        selected: plan.change.map((row) => ({
          messageId: row.messageId,
          tenant: row.tenant,
          order: row.order,
          eventType: row.eventType,
          from: row.state,
          attempts: row.attempts,
          nextAttemptAt: due.get(row.messageId)?.toISOString() ?? null,
        })),
        skipped: plan.skipped,
      };
    });
    this.report(options, report, () => describe(report, options));
  }

  @Option({ flags: '--all-dead', description: `every dead delivery, the longest dead first (at most ${ALL_LIMIT} per run)` })
  parseAllDead(): boolean {
    return true;
  }

  @Option({ flags: '-t, --tenant <id>', description: "with --all-dead: only this tenant's" })
  parseTenant(value: string): string {
    return parseTenant(value);
  }

  @Option({ flags: '--redeliver', description: 'also send named deliveries that were already delivered, again (see below)' })
  parseRedeliver(): boolean {
    return true;
  }

  @Option({ flags: '--dry-run', description: 'show what would be retried; change nothing' })
  parseDryRun(): boolean {
    return true;
  }

  @Help('after')
  retryNote(): string {
    return `
A dead delivery becomes pending and due now with attempts reset to 0 (a whole retry schedule); its
last status code and error stay on record until the next attempt replaces them. A pending one only
skips its wait. Each order's webhooks still go out one at a time in the order they were recorded,
so a retried delivery also holds back its order's later pending ones until it settles.
Refused: a delivery in flight (a dispatcher is POSTing it right now), and a delivered one unless
--redeliver is given. --redeliver POSTs it once more with the same webhook-id: a receiver that still
remembers that id drops it as a duplicate; one that lost it (restored from a backup) acts on it again.
Named ids are all or nothing: an unknown id or a refusal changes nothing. With --all-dead, a refused
one is skipped and named. Exit codes: 0 done, 1 refused or not found, 2 bad usage. See docs/operations.md.`;
  }
}

function describe(report: RetryReport, options: RetryOptions): string {
  const line = (s: RetryReport['selected'][number]) =>
    `  ${s.messageId}  ${s.eventType}  tenant ${s.tenant}  order ${s.order}  ` +
    (s.from === 'pending' ? `pending, attempts ${s.attempts}: due now` : `${s.from} -> pending, attempts ${s.attempts} -> 0, due now`);
  const lines = !report.selected.length
    ? [
        options.allDead
          ? `No dead webhook deliveries${options.tenant ? ` of tenant ${options.tenant}` : ''}: nothing to retry.`
          : 'Nothing to retry.',
      ]
    : report.dryRun
      ? [`Would retry ${report.selected.length} webhook delivery(ies) (dry run: nothing changed):`, ...report.selected.map(line)]
      : [`Retried ${report.selected.length} webhook delivery(ies):`, ...report.selected.map(line)];
  if (report.skipped.length) lines.push(`Skipped ${report.skipped.length}:`, ...report.skipped.map((s) => `  ${s.messageId}: ${s.reason}`));
  return lines.join('\n');
}
