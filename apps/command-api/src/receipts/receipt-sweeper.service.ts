import { Injectable, OnApplicationBootstrap, BeforeApplicationShutdown } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { InjectDataSource } from '@nestjs/typeorm';
import { PinoLogger } from 'nestjs-pino';
import { DataSource } from 'typeorm';
import { sweepExpiredReceipts } from '@app/idempotency';
import { CommandApiConfig } from '../config';

/**
 * Deletes expired receipts every RECEIPT_SWEEP_INTERVAL_SECONDS in bounded batches, and compacts those kept
 * as tombstones. Expiry itself never waits for the sweeper: a claim treats `now() >= expires_at` as
 * forgotten (or, inside a tombstone, as refused) either way. A shutdown waits for the batch in flight only:
 * a sweep may run up to 2,000 of them, and the next sweep takes whatever this one left.
 */
@Injectable()
export class ReceiptSweeper implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private timer?: NodeJS.Timeout;
  private running?: Promise<unknown>;
  private readonly stopping = new AbortController();

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly config: ConfigService<CommandApiConfig, true>,
    private readonly logger: PinoLogger,
  ) {
    logger.setContext(ReceiptSweeper.name);
  }

  onApplicationBootstrap(): void {
    const seconds = this.config.get('RECEIPT_SWEEP_INTERVAL_SECONDS', { infer: true });
    if (seconds > 0) this.timer = setInterval(() => void this.sweep(), seconds * 1000).unref();
  }

  async beforeApplicationShutdown(): Promise<void> {
    clearInterval(this.timer);
    this.stopping.abort();
    await this.running;
  }

  async sweep(): Promise<void> {
    if (this.running) return;
    const batchSize = this.config.get('RECEIPT_SWEEP_BATCH_SIZE', { infer: true });
    this.running = sweepExpiredReceipts(this.dataSource.manager, { batchSize, signal: this.stopping.signal })
      .then(
        ({ deleted, compacted }) =>
          (deleted || compacted) && this.logger.info({ deleted, compacted }, 'swept expired idempotency receipts'),
      )
      .catch((error) => this.logger.warn({ err: error }, 'receipt sweep failed; the next run retries'))
      .finally(() => (this.running = undefined));
    await this.running;
  }
}
