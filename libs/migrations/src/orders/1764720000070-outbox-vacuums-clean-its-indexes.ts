import { VacuumsCleanIndexes } from '../vacuums-clean-indexes';

/**
 * Every vacuum of the outbox cleans its indexes: the relay's claim walks the unpublished index in
 * sequence order, and a published row's entry there goes only then. On a table keeping days of
 * published rows, a drained broker outage is under the 2 % of pages below which vacuum would leave the
 * indexes as they are, and every claim would keep walking those entries until enough other rows died.
 */
export class OutboxVacuumsCleanItsIndexes1764720000070 extends VacuumsCleanIndexes {
  readonly name = 'OutboxVacuumsCleanItsIndexes1764720000070';
  protected readonly table = 'outbox_messages';
}
