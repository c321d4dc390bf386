import { Command, CommandRunner, Option } from 'nest-commander';
import { sweepExpiredReceipts } from '@app/idempotency';
import { integerOption } from '../options';
import { OrdersDatabase } from '../orders-database.module';
import { print } from '../output';

@Command({
  name: 'receipts:sweep',
  description: 'Delete expired idempotency receipts in bounded batches (expired keys already run as new requests)',
})
export class ReceiptsSweepCommand extends CommandRunner {
  constructor(private readonly db: OrdersDatabase) {
    super();
  }

  async run(_: string[], options: { batchSize?: number; json?: boolean }): Promise<void> {
    const deleted = await sweepExpiredReceipts(await this.db.manager(), { batchSize: options.batchSize ?? 1_000, maxBatches: Infinity });
    print(options.json, { deleted }, () => `Deleted ${deleted} expired receipt(s).`);
  }

  @Option({ flags: '-b, --batch-size <n>', description: 'rows per DELETE statement (default 1000)' })
  parseBatchSize(value: string): number {
    return integerOption('--batch-size', value, 1, 100_000);
  }

  @Option({ flags: '--json', description: 'print {"deleted": n}' })
  parseJson(): boolean {
    return true;
  }
}
