import { Command, Option } from 'nest-commander';
import { sweepExpiredReceipts } from '@app/idempotency';
import { integerOption } from '../options';
import { OrdersDatabase } from '../orders-database.module';
import { OpsCommand } from '../ops-command';

@Command({
  name: 'receipts:sweep',
  description:
    'Delete expired idempotency receipts in bounded batches (expired keys already run as new requests); ' +
    'compact those kept as tombstones (their stored response goes, the row stays until the tombstone ends)',
})
export class ReceiptsSweepCommand extends OpsCommand<{ batchSize?: number; json?: boolean }> {
  protected readonly jsonShape = '{"deleted": n, "compacted": n}';

  constructor(private readonly db: OrdersDatabase) {
    super();
  }

  async run(_: string[], options: { batchSize?: number; json?: boolean }): Promise<void> {
    const swept = await sweepExpiredReceipts(await this.db.manager(), { batchSize: options.batchSize ?? 1_000, maxBatches: Infinity });
    this.report(options, swept, () => `Deleted ${swept.deleted} expired receipt(s); compacted ${swept.compacted} kept as tombstones.`);
  }

  @Option({ flags: '-b, --batch-size <n>', description: 'rows per DELETE or compacting UPDATE statement (default 1000)' })
  parseBatchSize(value: string): number {
    return integerOption('--batch-size', value, 1, 100_000);
  }
}
