import { Command } from 'nest-commander';
import { revokeApiClient } from '@app/api-clients';
import { canonicalUuid } from '@app/contracts';
import { CliError, ExitCode } from '../cli-error';
import { OrdersDatabase } from '../orders-database.module';
import { OpsCommand } from '../ops-command';

@Command({
  name: 'clients:revoke',
  arguments: '<clientId>',
  description: 'Revoke an API client: its key is refused (401) from the next request on',
})
export class ClientsRevokeCommand extends OpsCommand {
  protected readonly jsonShape = '{clientId, tenant, revokedAt}';

  constructor(private readonly db: OrdersDatabase) {
    super();
  }

  async run([text]: string[], options: { json?: boolean }): Promise<void> {
    const clientId = canonicalUuid(text);
    if (!clientId) throw new CliError('clientId must be a UUID (see clients:list)', ExitCode.usage);
    const client = await revokeApiClient(await this.db.manager(), clientId);
    if (!client) throw new CliError(`no client ${clientId}`);
    const result = { clientId, tenant: client.tenantId, revokedAt: client.revokedAt!.toISOString() };
    this.report(options, result, () => `Revoked client ${clientId} (tenant ${client.tenantId}) at ${result.revokedAt}`);
  }
}
