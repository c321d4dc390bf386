import { VacuumsCleanIndexes } from '../vacuums-clean-indexes';

/**
 * Every vacuum of the webhook queue cleans its indexes, as the outbox's do (orders migration 070): the
 * dispatcher's claim walks the index of pending deliveries, and a delivered row's entry there goes
 * only then. On a table keeping days of deliveries, a receiver outage's backlog is under the 2 % of
 * pages below which vacuum would leave the indexes as they are.
 */
export class WebhookQueueVacuumsCleanItsIndexes1764720000410 extends VacuumsCleanIndexes {
  readonly name = 'WebhookQueueVacuumsCleanItsIndexes1764720000410';
  protected readonly table = 'webhook_deliveries';
}
