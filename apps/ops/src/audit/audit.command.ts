import { ConfigService } from '@nestjs/config';
import { Command, Option } from 'nest-commander';
import { declaredRetentions } from '@app/inbox';
import { CliError } from '../cli-error';
import { integerOption } from '../options';
import { OpsConfig } from '../config';
import { ConsumerDatabases } from '../consumer-databases';
import { OrdersDatabase } from '../orders-database.module';
import { AuditReport, AuditSettings, CheckResult, renderReport } from './audit-report';
import { ConsumerInbox, inboxEntriesHaveOutboxRows, onDatabase, publishedEventsReachedConsumers } from './cross-database-checks';
import { appliedEventsHaveWebhookDeliveries } from './notifier-checks';
import { ordersHaveOutboxEvents, outboxEventsHaveOrders, receiptsHaveEffects } from './orders-checks';
import { OpsCommand } from '../ops-command';

interface AuditOptions {
  limit?: number;
  graceSeconds?: number;
  json?: boolean;
}

@Command({
  name: 'audit',
  description:
    'Read-only: check that receipts, orders, outbox rows, consumer inboxes and webhook deliveries still describe the same committed facts ' +
    '(run it after restoring a backup or switching storage; see docs/audit.md). Exit 1 on any mismatch',
})
export class AuditCommand extends OpsCommand<AuditOptions> {
  protected readonly jsonShape = '{"ok":bool,"checks":[{"name","checked","mismatches","examples":[...],"hint"?,"notes"?:[...]}]}';

  constructor(
    private readonly orders: OrdersDatabase,
    private readonly consumers: ConsumerDatabases,
    private readonly config: ConfigService<OpsConfig, true>,
  ) {
    super();
  }

  async run(_: string[], options: AuditOptions): Promise<void> {
    const settings: AuditSettings = {
      limit: options.limit ?? 10,
      graceSeconds: options.graceSeconds ?? 30,
      outboxRetentionSeconds: this.config.get('OUTBOX_RETENTION_SECONDS', { infer: true }),
    };
    const orders = await this.orders.manager();
    const databases = await this.consumers.all();
    const notifier = await this.consumers.get('notifier');
    const inboxes: ConsumerInbox[] = [];
    for (const database of databases) {
      inboxes.push({ database, consumers: await onDatabase(database.name, () => declaredRetentions(database.manager)) });
    }

    const checks: CheckResult[] = [
      await onDatabase('orders', () => receiptsHaveEffects(orders, settings.limit)),
      await onDatabase('orders', () => ordersHaveOutboxEvents(orders, settings.limit, settings.outboxRetentionSeconds)),
      await onDatabase('orders', () => outboxEventsHaveOrders(orders, settings.limit)),
      await publishedEventsReachedConsumers(orders, inboxes, { ...settings, json: options.json }),
      await inboxEntriesHaveOutboxRows(orders, databases, { ...settings, json: options.json }),
      await onDatabase('notifier', () => appliedEventsHaveWebhookDeliveries(notifier.manager, settings.limit)),
    ];
    const report: AuditReport = { ok: checks.every((check) => check.mismatches === 0), checks };
    this.report(options, report, () => renderReport(report, settings));
    if (!report.ok) {
      const failed = checks.filter((check) => check.mismatches > 0);
      throw new CliError(`audit found mismatches: ${failed.map((check) => `${check.name} (${check.mismatches})`).join(', ')}`);
    }
  }

  @Option({ flags: '-l, --limit <n>', description: 'mismatches shown per check, 0-1000 (default 10)' })
  parseLimit(value: string): number {
    return integerOption('--limit', value, 0, 1_000);
  }

  @Option({
    flags: '-g, --grace-seconds <s>',
    description: 'events published this recently may still be on their way to consumers: not checked yet, 0-86400 (default 30)',
  })
  parseGraceSeconds(value: string): number {
    return integerOption('--grace-seconds', value, 0, 86_400);
  }
}
