import { Command, Help, Option } from 'nest-commander';
import { countForgettable, sweepInbox } from '@app/inbox';
import { ConsumerDatabases } from '../consumer-databases';
import { duration } from '../output';
import { progress } from '../progress';
import { OpsCommand } from '../ops-command';

interface SweepOptions {
  consumer?: string;
  dryRun?: boolean;
  json?: boolean;
}

@Command({
  name: 'inbox:sweep',
  description: "Delete each consumer's inbox rows older than the retention it declared (never sooner)",
})
export class InboxSweepCommand extends OpsCommand<SweepOptions> {
  protected readonly jsonShape = '{dryRun, consumers: [{database, consumer, retentionSeconds, eligible, deleted}]}';

  constructor(private readonly databases: ConsumerDatabases) {
    super();
  }

  async run(_: string[], options: SweepOptions): Promise<void> {
    const consumers = await this.databases.selectConsumers(options.consumer);
    const report = await Promise.all(
      consumers.map(async ({ database, consumer, retentionSeconds }) => ({
        database: database.name,
        consumer,
        retentionSeconds,
        eligible: await countForgettable(database.manager, { consumer, retentionSeconds }),
        deleted: 0,
      })),
    );

    if (!options.dryRun) {
      const bar = progress(
        'inbox:sweep',
        report.reduce((sum, r) => sum + r.eligible, 0),
        options,
      );
      try {
        for (const [i, { database, consumer, retentionSeconds }] of consumers.entries()) {
          report[i].deleted = await sweepInbox(database.manager, {
            consumer,
            retentionSeconds,
            maxBatches: Infinity,
            onBatch: (n) => bar.increment(n),
          });
        }
      } finally {
        bar.stop();
      }
    }

    this.report(options, { dryRun: options.dryRun ?? false, consumers: report }, () =>
      report.length
        ? report
            .map(
              (r) =>
                `${r.consumer} (database ${r.database}, retention ${duration(r.retentionSeconds)}): ` +
                (options.dryRun ? `would delete ${r.eligible} inbox row(s) (dry run)` : `deleted ${r.deleted} inbox row(s)`),
            )
            .join('\n')
        : 'No consumers registered yet: each consumer registers itself (inbox_consumers) when it starts.',
    );
  }

  @Option({ flags: '-c, --consumer <name>', description: 'only this consumer (as registered in inbox_consumers)' })
  parseConsumer(value: string): string {
    return value;
  }

  @Option({ flags: '--dry-run', description: 'count the rows it would delete; delete nothing' })
  parseDryRun(): boolean {
    return true;
  }

  @Help('after')
  retentionNote(): string {
    return `
Each consumer declares its retention itself (INBOX_RETENTION_SECONDS, stored in inbox_consumers when
it starts). There is deliberately no flag to sweep sooner: outbox:replay refuses to replay rows older
than the smallest declared retention (dlq:redrive likewise), trusting that no consumer forgot a
message-id before then. An inbox row swept early would let a replayed message apply a second time.
To keep less, lower the consumer's INBOX_RETENTION_SECONDS and restart it. See docs/operator-cli.md.`;
  }
}
