import { Command, Help, Option } from 'nest-commander';
import { ConsumerDatabases } from '../consumer-databases';
import { deadLetterDeliveries, lockDeliveries } from './webhook-deliveries';
import { DeadLetterOptions, deadLetterSelection, parseReason } from './webhook-options';
import { planDeadLetter } from './webhook-plan';
import { OpsCommand } from '../ops-command';

interface DeadLetterReport {
  reason: string;
  deadLettered: { messageId: string; tenant: string; order: string; eventType: string; attempts: number; deadAt: string }[];
}

@Command({
  name: 'webhooks:dead-letter',
  arguments: '[messageIds...]',
  description: 'Give up pending webhook deliveries: dead now, with your reason as their last error',
})
export class WebhooksDeadLetterCommand extends OpsCommand<DeadLetterOptions> {
  protected readonly jsonShape = '{reason, deadLettered: [{messageId, tenant, order, eventType, attempts, deadAt}]}';

  constructor(private readonly databases: ConsumerDatabases) {
    super();
  }

  async run(args: string[], options: DeadLetterOptions): Promise<void> {
    const { messageIds, reason } = deadLetterSelection(args, options);
    const { manager } = await this.databases.get('notifier');
    const report = await manager.transaction(async (tx): Promise<DeadLetterReport> => {
      const plan = planDeadLetter(await lockDeliveries(tx, messageIds), messageIds);
      const dead = await deadLetterDeliveries(
        tx,
        plan.change.map((row) => row.messageId),
        reason,
      );
      return {
        reason,
        deadLettered: plan.change.map((row) => ({
          messageId: row.messageId,
          tenant: row.tenant,
          order: row.order,
          eventType: row.eventType,
          attempts: row.attempts,
          deadAt: dead.get(row.messageId)!.toISOString(),
        })),
      };
    });
    this.report(options, report, () =>
      [
        `Gave up ${report.deadLettered.length} webhook delivery(ies) (${reason}):`,
        ...report.deadLettered.map(
          (d) => `  ${d.messageId}  ${d.eventType}  tenant ${d.tenant}  order ${d.order}  after ${d.attempts} attempt(s)`,
        ),
      ].join('\n'),
    );
  }

  @Option({ flags: '-r, --reason <text>', description: 'why (required, 1-500 characters): kept as the last error' })
  parseReason(value: string): string {
    return parseReason(value);
  }

  @Help('after')
  deadLetterNote(): string {
    return `
Only pending deliveries: a delivered one is refused, and so is one in flight (a dispatcher is POSTing
it right now and would still deliver it). The order's later pending webhooks no longer wait for it.
webhooks:retry brings a dead one back. All or nothing: an unknown id or a refusal changes nothing.
Exit codes: 0 done, 1 refused or not found, 2 bad usage. See docs/operations.md.`;
  }
}
