import { Queryable, queryRows } from '@app/platform';

/**
 * What one look at the unpublished index saw, under one snapshot: the lowest unpublished sequence of
 * the relay's shards at or above its floor (null: none), and the snapshot's bounds: every transaction
 * with an id below `xmin` had ended, every id from `xmax` on was not yet given out.
 */
export interface FloorSighting {
  lowest: bigint | null;
  xmin: bigint;
  xmax: bigint;
}

/** How many sightings wait for their transactions at most; a newer one replaces the newest beyond that. */
const WAITING = 16;

/**
 * Where the relay's claims start reading the unpublished index: every row of its shards numbered below
 * the floor is published, or was never committed and never will be.
 *
 * Why: a published row's entry in the unpublished index stays until a vacuum cleans the indexes, and
 * a claim that starts at the bottom walks every such entry. After a backlog that is hundreds of index
 * pages per claim, at a trickle one claim per commit, until a vacuum that a table keeping days of rows
 * may not see for hours.
 *
 * Why not just the lowest unpublished row a claim saw: a transaction that drew a lower number may
 * still be running and commit after it (any two concurrent writers), and its row would sit below the
 * floor, never claimed. So a sighting counts only once every transaction that was running when it was
 * taken has ended (its snapshot's `xmax` at or below a later snapshot's `xmin`): a row numbered below
 * the sighting's lowest was drawn before the lowest's transaction committed, so before the sighting,
 * by a transaction that already had its id (migration 080: the sequence's default takes the id before
 * it draws) and was then running, now ended. The later sighting shows whether any such row committed
 * and is still unpublished; the floor rises to the lower of the two lowests.
 *
 * A transaction left open anywhere on the server holds the floor where it is (its id bounds every
 * snapshot's `xmin`): claims then walk from there, as they did before there was a floor, and nothing
 * is missed. The relay also starts again from the bottom at every heartbeat (`reset`), and whenever
 * its shards change, so that a row no rule above foresaw (an operator's hand-written UPDATE setting
 * `published_at` back to NULL, a sequence given explicitly) waits one heartbeat at most.
 */
export class ClaimFloor {
  private floor = 0n;
  /** Sightings whose transactions may still be running, oldest first (their xmax never decreases). */
  private waiting: { lowest: bigint; xmax: bigint }[] = [];

  /** The floor, for the claim (`sequence >= floor`). */
  get value(): bigint {
    return this.floor;
  }

  /** From the bottom again: at every heartbeat and when the relay's shards or session change. */
  reset(): void {
    this.floor = 0n;
    this.waiting = [];
  }

  /** Takes what a look at the index saw: raises the floor where an earlier sighting's transactions have all ended. */
  observe({ lowest, xmin, xmax }: FloorSighting): void {
    let settled: bigint | undefined;
    while (this.waiting.length && this.waiting[0].xmax <= xmin) {
      const { lowest: seen } = this.waiting.shift()!;
      if (settled === undefined || seen > settled) settled = seen;
    }
    if (settled !== undefined) {
      const floor = lowest !== null && lowest < settled ? lowest : settled;
      if (floor > this.floor) this.floor = floor;
    }
    if (lowest === null) return;
    const sighting = { lowest, xmax };
    if (this.waiting.length < WAITING) this.waiting.push(sighting);
    else this.waiting[WAITING - 1] = sighting;
  }
}

/**
 * The look `ClaimFloor.observe` takes: one statement, so the lowest row and the snapshot's bounds come
 * from the same snapshot. $1 shard count, $2 owned shards, $3 the floor. The first unpublished row of
 * the shards counts whatever a claim would do with it (parked, held back behind a parked row, in
 * flight, locked): it is not published yet.
 *
 * With none, the look sees the number after the highest row the snapshot shows, of any shard: every row
 * of the relay's shards it shows from the floor up to there is published, and a row numbered below it
 * that the snapshot does not show was drawn before the highest was (numbers are drawn in order), so by
 * a transaction then running; the same as a row below an unpublished lowest, and the floor rises the
 * same way. Without it an idle relay saw nothing, its floor stayed at the bottom, and every poll walked
 * every dead entry. `COALESCE` reads the highest row (the top of the sequence's index) only then.
 */
const LOOK = /* sql */ `
    SELECT pg_snapshot_xmin(s)::text AS xmin, pg_snapshot_xmax(s)::text AS xmax,
           COALESCE(
             (SELECT o.sequence FROM outbox_messages o
              WHERE o.published_at IS NULL AND o.sequence >= $3 AND o.key_hash % $1 = ANY($2::int[])
              ORDER BY o.sequence LIMIT 1),
             (SELECT o.sequence + 1 FROM outbox_messages o ORDER BY o.sequence DESC LIMIT 1)
           )::text AS lowest
    FROM pg_current_snapshot() AS s`;

export async function lookAtFloor(
  on: Queryable,
  { shards, shardCount, floor }: { shards: number[]; shardCount: number; floor: bigint },
): Promise<FloorSighting> {
  const { rows } = await queryRows<{ xmin: string; xmax: string; lowest: string | null }>(on, LOOK, [shardCount, shards, floor.toString()]);
  const [{ xmin, xmax, lowest }] = rows;
  return { lowest: lowest === null ? null : BigInt(lowest), xmin: BigInt(xmin), xmax: BigInt(xmax) };
}
