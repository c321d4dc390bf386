import { EntityManager } from 'typeorm';
import { declaredRetentions } from '@app/inbox';
import { ConsumerDatabase } from '../consumer-databases';
import { countCommittedBefore, ReplaySelection } from './replay-selection';

export interface ConsumerCutoff {
  consumer: string;
  /** The consumer database its retention was read from. */
  database: string;
  retentionSeconds: number;
  /** Message-ids received before this instant may be forgotten by this consumer. */
  cutoff: string;
  /** Selected rows committed before the cut-off (a copy may have been received then): these could apply again. */
  pastRetention: number;
}

export interface GuardVerdict {
  verdict: 'ok' | 'refused' | 'forced';
  consumers: ConsumerCutoff[];
  /** Why a replay without --force is refused (one line); null when it is not. */
  reason: string | null;
  /** The smallest declared retention, re-checked batch by batch while a long replay runs. */
  smallestRetentionSeconds: number | null;
}

/**
 * A consumer deduplicates only the message-ids its inbox still remembers (its declared retention,
 * `inbox_consumers`). A selected row committed before now - retention of any consumer may have been
 * received before it too, whenever the relay marked it published, and would apply again there, so the
 * replay is refused unless forced; so is a replay no consumer declared a retention for.
 */
export async function checkGuard(
  orders: EntityManager,
  consumerDatabases: ConsumerDatabase[],
  selection: ReplaySelection,
  { force }: { force: boolean },
): Promise<GuardVerdict> {
  const consumers: ConsumerCutoff[] = [];
  for (const database of consumerDatabases) {
    for (const { consumer, retentionSeconds } of await declaredRetentions(database.manager)) {
      const cutoff = new Date(selection.selectedAt.getTime() - retentionSeconds * 1000);
      const pastRetention = await countCommittedBefore(orders, selection, cutoff);
      consumers.push({ consumer, database: database.name, retentionSeconds, cutoff: cutoff.toISOString(), pastRetention });
    }
  }
  const reason = refusal(
    consumers,
    consumerDatabases.map((database) => database.name),
  );
  return {
    verdict: reason ? (force ? 'forced' : 'refused') : 'ok',
    consumers,
    reason,
    smallestRetentionSeconds: consumers.length ? Math.min(...consumers.map((c) => c.retentionSeconds)) : null,
  };
}

function refusal(consumers: ConsumerCutoff[], databases: string[]): string | null {
  if (!consumers.length) {
    return `refusing to replay: no consumer declares an inbox retention (inbox_consumers is empty in the ${databases.join(', ')} database(s)), so nothing says a replay would be deduplicated; start the consumers once, or pass --force`;
  }
  const past = consumers.filter((c) => c.pastRetention > 0);
  if (!past.length) return null;
  const clauses = past.map(
    (c) =>
      `consumer "${c.consumer}" (inbox retention ${c.retentionSeconds} s) forgets message-ids received before ${c.cutoff}, and ${c.pastRetention} selected row(s) were committed before it`,
  );
  return `refusing to replay: ${clauses.join('; ')}: they would apply again. Narrow the range (--from), or pass --force if applying them again is intended`;
}
