import { Command, Option } from 'nest-commander';
import { listApiClients } from '@app/api-clients';
import { OrdersDatabase } from '../orders-database.module';
import { OpsCommand } from '../ops-command';

@Command({ name: 'clients:list', description: 'List API clients (never their keys)' })
export class ClientsListCommand extends OpsCommand<{ tenant?: string; json?: boolean }> {
  protected readonly jsonShape = 'an array of {clientId, tenant, name, operations, createdAt, revokedAt}';

  constructor(private readonly db: OrdersDatabase) {
    super();
  }

  async run(_: string[], options: { tenant?: string; json?: boolean }): Promise<void> {
    const clients = await listApiClients(await this.db.manager(), options.tenant);
    const rows = clients.map((client) => ({
      clientId: client.id,
      tenant: client.tenantId,
      name: client.name,
      operations: client.allowedOperations,
      createdAt: client.createdAt.toISOString(),
      revokedAt: client.revokedAt?.toISOString() ?? null,
    }));
    this.report(options, rows, () =>
      rows.length
        ? rows
            .map(
              (r) =>
                `${r.clientId}  ${r.tenant}  ${r.name}  ${r.operations.join(',')}  ${r.revokedAt ? `revoked ${r.revokedAt}` : 'active'}`,
            )
            .join('\n')
        : 'no clients',
    );
  }

  @Option({ flags: '-t, --tenant <id>', description: 'only this tenant' })
  parseTenant(value: string): string {
    return value;
  }
}
