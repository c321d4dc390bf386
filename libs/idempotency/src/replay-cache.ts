import { LRUCache } from 'lru-cache';
import { Fingerprint } from './fingerprint';
import { IdempotentRequest, refuseAnotherRequest } from './receipt-store';
import { IdempotentResponse } from './run-idempotent';
import { IdempotencyScope } from './scope';

export interface ReplayCacheOptions {
  /** Receipts kept, the most recently used first; the rest are read from the database again. */
  entries: number;
  /** The longest any receipt is kept (0: none is): how long a receipt changed by hand may go unseen. */
  maxSeconds: number;
  /** The clock, performance.now() unless a test gives its own. */
  clock?: { now(): number };
}

interface Remembered {
  fingerprint: Fingerprint;
  response: IdempotentResponse['response'];
  expiresAt: Date;
}

/**
 * The committed receipts this process answered with, so that a retry is replayed without a round trip
 * to PostgreSQL. Sound because a committed receipt does not change before it expires: claims, the sweep
 * and compaction touch only expired ones (receipt-store.ts, receipt-queries.ts). So an entry gives the
 * database's own answer (the stored response, or KEY_REUSED for other fields) for as long as it lives:
 * - never up to the receipt's expiry: it lives expires_at − now() of the transaction that read or wrote
 *   the receipt, counted from a moment before that transaction began, so it is gone before PostgreSQL's
 *   clock reaches expires_at; after that the database decides again (a new execution or a tombstone).
 *   The margin allows for clocks slewed apart (NTP changes a clock's pace by at most 0.05 %); a clock
 *   stepped by hand is not seen by entries already held, for at most `maxSeconds`;
 * - at most `maxSeconds`: the bound on how long an instance may go on replaying a receipt someone changed
 *   or deleted by hand;
 * - while among the `entries` most recently used.
 * Anything the cache does not hold (a first request, a request in flight elsewhere, an error) goes to the
 * database as before. Authentication and validation happen before it is asked.
 */
export class ReplayCache {
  private readonly cache?: LRUCache<string, Remembered>;
  private readonly clock: { now(): number };

  constructor(private readonly options: ReplayCacheOptions) {
    this.clock = options.clock ?? performance;
    if (options.maxSeconds > 0 && options.entries > 0) {
      // ttlResolution 0: every read compares with the clock itself, never with a reading kept for a while.
      this.cache = new LRUCache({ max: options.entries, ttlResolution: 0, perf: this.clock });
    }
  }

  /** A moment before a transaction begins, for `remember`. */
  now(): number {
    return this.clock.now();
  }

  /**
   * The replay of the receipt this process holds for `request`'s scope, or undefined. Fields that differ
   * from the stored request's are refused as the receipt store refuses them (IDEMPOTENCY.KEY_REUSED).
   */
  replay(request: IdempotentRequest): IdempotentResponse | undefined {
    const held = this.cache?.get(cacheKey(request.scope));
    if (!held) return undefined;
    refuseAnotherRequest(request.fields, held.fingerprint);
    return { outcome: 'replayed', response: held.response, expiresAt: held.expiresAt, messageIds: [] };
  }

  /**
   * Keeps the committed receipt behind `result` for `request`'s scope. `began`: this cache's `now()`,
   * taken before the transaction that returned `result` began. Call it only once that transaction committed.
   */
  remember(request: IdempotentRequest, result: IdempotentResponse, began: number): void {
    if (!this.cache || !result.receipt) return;
    // Timestamps arrive truncated to the millisecond: the difference may be 1 ms longer than the truth.
    const untilExpiry = result.expiresAt.getTime() - result.receipt.databaseNow.getTime() - 1;
    const ttl = Math.min(Math.floor(untilExpiry * 0.999) - 1, this.options.maxSeconds * 1000);
    if (ttl <= 0) return;
    const { response, expiresAt } = result;
    this.cache.set(cacheKey(request.scope), { fingerprint: result.receipt.fingerprint, response, expiresAt }, { ttl, start: began });
  }
}

function cacheKey({ tenantId, operation, key }: IdempotencyScope): string {
  // JSON: no choice of separator can collide, whatever characters a key holds.
  return JSON.stringify([tenantId, operation, key]);
}
