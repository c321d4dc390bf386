import { ConfigService } from '@nestjs/config';
import { Command, Help, Option } from 'nest-commander';
import { countPublishedBefore, deletePublishedBefore } from '@app/outbox';
import { integerOption } from '../options';
import { OpsConfig } from '../config';
import { OrdersDatabase } from '../orders-database.module';
import { duration } from '../output';
import { progress } from '../progress';
import { OpsCommand } from '../ops-command';

interface CleanupOptions {
  olderThan?: number;
  batchSize?: number;
  dryRun?: boolean;
  json?: boolean;
}

@Command({
  name: 'outbox:cleanup',
  description: 'Delete published outbox rows past the retention, in bounded batches (never unpublished or parked rows)',
})
export class OutboxCleanupCommand extends OpsCommand<CleanupOptions> {
  protected readonly jsonShape = '{olderThanSeconds, dryRun, eligible, deleted}';

  private readonly retentionSeconds: number;

  constructor(
    private readonly db: OrdersDatabase,
    config: ConfigService<OpsConfig, true>,
  ) {
    super();
    this.retentionSeconds = config.get('OUTBOX_RETENTION_SECONDS', { infer: true });
  }

  async run(_: string[], options: CleanupOptions): Promise<void> {
    const olderThanSeconds = options.olderThan ?? this.retentionSeconds;
    const batchSize = options.batchSize ?? 1_000;
    const manager = await this.db.manager();
    const eligible = await countPublishedBefore(manager, olderThanSeconds);
    let deleted = 0;
    if (!options.dryRun) {
      const bar = progress('outbox:cleanup', eligible, options);
      try {
        deleted = await deletePublishedBefore(manager, {
          retentionSeconds: olderThanSeconds,
          batchSize,
          maxBatches: Infinity,
          onBatch: (n) => bar.increment(n),
        });
      } finally {
        bar.stop();
      }
    }
    const result = { olderThanSeconds, dryRun: options.dryRun ?? false, eligible, deleted };
    this.report(options, result, () =>
      options.dryRun
        ? `Would delete ${eligible} published outbox row(s) published more than ${duration(olderThanSeconds)} ago (dry run: nothing deleted).`
        : `Deleted ${deleted} published outbox row(s) published more than ${duration(olderThanSeconds)} ago.`,
    );
  }

  @Option({ flags: '--older-than <seconds>', description: 'age of published rows to delete (default OUTBOX_RETENTION_SECONDS)' })
  parseOlderThan(value: string): number {
    return integerOption('--older-than', value, 60, 365 * 24 * 3600, 'seconds');
  }

  @Option({ flags: '-b, --batch-size <n>', description: 'rows per DELETE statement (default 1000)' })
  parseBatchSize(value: string): number {
    return integerOption('--batch-size', value, 1, 100_000);
  }

  @Option({ flags: '--dry-run', description: 'count the rows it would delete; delete nothing' })
  parseDryRun(): boolean {
    return true;
  }

  @Help('after')
  retentionNote(): string {
    return `
Only rows with published_at older than the cut-off go; unpublished and parked rows are never deleted.
The outbox retention bounds how far back an operator can replay (outbox:replay republishes rows that
are still here): keep OUTBOX_RETENTION_SECONDS at least as long as the replay window you may need.
See docs/operator-cli.md.`;
  }
}
