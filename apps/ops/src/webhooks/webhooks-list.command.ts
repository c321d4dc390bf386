import { Command, Option } from 'nest-commander';
import { ConsumerDatabases } from '../consumer-databases';
import { integerOption } from '../options';
import { duration } from '../output';
import { DeliverySummary, listDeliveries, ListedDelivery, summarizeDeliveries } from './webhook-deliveries';
import { DeliveryState, parseOrder, parseState, parseTenant } from './webhook-options';
import { OpsCommand } from '../ops-command';

interface ListOptions {
  state?: DeliveryState;
  order?: string;
  tenant?: string;
  limit?: number;
  json?: boolean;
}

@Command({
  name: 'webhooks:list',
  description: "The notifier's webhook deliveries, newest first, with counts per state and the oldest pending one's age",
})
export class WebhooksListCommand extends OpsCommand<ListOptions> {
  protected readonly jsonShape =
    '{summary: {pending, delivered, dead, inFlight, oldestPendingAgeSeconds}, deliveries: [{messageId, tenant, order, eventType, state, attempts, statusCode, lastError, inFlight, leasedUntil, nextAttemptAt, waitingBehind, deliveredAt, deadAt, createdAt, sequence, url}]}';

  constructor(private readonly databases: ConsumerDatabases) {
    super();
  }

  async run(_: string[], options: ListOptions): Promise<void> {
    const { manager } = await this.databases.get('notifier');
    const filter = { state: options.state, order: options.order, tenant: options.tenant };
    const summary = await summarizeDeliveries(manager, filter);
    const deliveries = (await listDeliveries(manager, filter, options.limit ?? 50)).map(asJson);
    this.report(options, { summary, deliveries }, () => describe(summary, deliveries, options));
  }

  @Option({ flags: '-s, --state <state>', description: 'only deliveries in this state: pending, delivered or dead' })
  parseState(value: string): DeliveryState {
    return parseState(value);
  }

  @Option({ flags: '-o, --order <uuid>', description: 'only the deliveries of this order' })
  parseOrder(value: string): string {
    return parseOrder(value);
  }

  @Option({ flags: '-t, --tenant <id>', description: 'only the deliveries of this tenant' })
  parseTenant(value: string): string {
    return parseTenant(value);
  }

  @Option({ flags: '-l, --limit <n>', description: 'at most this many (default 50, at most 1000)' })
  parseLimit(value: string): number {
    return integerOption('--limit', value, 1, 1_000);
  }
}

type Shown = ReturnType<typeof asJson>;

function asJson(row: ListedDelivery) {
  const iso = (time: Date | null) => time?.toISOString() ?? null;
  return {
    messageId: row.messageId,
    tenant: row.tenant,
    order: row.order,
    eventType: row.eventType,
    state: row.state,
    attempts: row.attempts,
    statusCode: row.statusCode,
    lastError: row.lastError,
    inFlight: row.inFlight,
    leasedUntil: iso(row.leasedUntil),
    nextAttemptAt: row.state === 'pending' ? iso(row.nextAttemptAt) : null,
    waitingBehind: row.waitingBehind,
    deliveredAt: iso(row.deliveredAt),
    deadAt: iso(row.deadAt),
    createdAt: row.createdAt.toISOString(),
    sequence: row.sequence,
    url: row.url,
  };
}

function describe(summary: DeliverySummary, deliveries: Shown[], options: ListOptions): string {
  const scope = [options.tenant && `tenant ${options.tenant}`, options.order && `order ${options.order}`].filter(Boolean).join(', ');
  const pending =
    `${summary.pending} pending` +
    (summary.pending ? ` (${summary.inFlight} in flight, the oldest recorded ${duration(summary.oldestPendingAgeSeconds ?? 0)} ago)` : '');
  const lines = [`Webhook deliveries${scope ? ` of ${scope}` : ''}: ${pending}, ${summary.delivered} delivered, ${summary.dead} dead`];
  if (!deliveries.length) lines.push(options.state ? `none ${options.state}` : 'none');
  for (const row of deliveries) {
    const when =
      row.state === 'delivered'
        ? `delivered ${row.deliveredAt}`
        : row.state === 'dead'
          ? `dead ${row.deadAt}`
          : row.inFlight
            ? `in flight until ${row.leasedUntil}`
            : `next attempt ${row.nextAttemptAt}${row.waitingBehind ? ` (after ${row.waitingBehind})` : ''}`;
    lines.push(
      `${row.createdAt}  ${row.state.padEnd(9)}  ${row.messageId}  ${row.eventType}  tenant ${row.tenant}  order ${row.order}  ` +
        `attempts ${row.attempts}  ${when}${row.statusCode === null ? '' : `  last HTTP ${row.statusCode}`}${row.lastError ? `  ${row.lastError}` : ''}`,
    );
  }
  return lines.join('\n');
}
