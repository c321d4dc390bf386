import { Command, Option } from 'nest-commander';
import { createApiClient } from '@app/api-clients';
import { allOperations, isOperation, Operation } from '@app/contracts';
import { CliError, ExitCode } from '../cli-error';
import { OrdersDatabase } from '../orders-database.module';
import { OpsCommand } from '../ops-command';

interface CreateOptions {
  tenant?: string;
  name?: string;
  operations?: Operation[];
  json?: boolean;
}

const TENANT = /^[A-Za-z0-9._-]{1,64}$/;

@Command({ name: 'clients:create', description: 'Create an API client for a tenant and print its key (shown once)' })
export class ClientsCreateCommand extends OpsCommand<CreateOptions> {
  protected readonly jsonShape = '{"tenant","clientId","apiKey","operations"}';

  constructor(private readonly db: OrdersDatabase) {
    super();
  }

  async run(_: string[], options: CreateOptions): Promise<void> {
    if (!options.tenant) throw new CliError('--tenant <id> is required', ExitCode.usage);
    const { client, apiKey } = await createApiClient(await this.db.manager(), {
      tenantId: options.tenant,
      name: options.name,
      operations: options.operations,
    });
    const result = { tenant: client.tenantId, clientId: client.id, apiKey, operations: client.allowedOperations };
    this.report(options, result, () =>
      [
        `Created client ${client.id} (${client.name}) for tenant ${client.tenantId}`,
        `Operations: ${client.allowedOperations.join(', ')}`,
        `API key (shown once, store it now): ${apiKey}`,
      ].join('\n'),
    );
  }

  @Option({ flags: '-t, --tenant <id>', description: 'tenant id (required): 1-64 of A-Z a-z 0-9 . _ -' })
  parseTenant(value: string): string {
    if (!TENANT.test(value)) throw new CliError('--tenant must be 1-64 of A-Z, a-z, 0-9, ".", "_", "-"', ExitCode.usage);
    return value;
  }

  @Option({ flags: '-n, --name <name>', description: 'a label for operators' })
  parseName(value: string): string {
    if (!value.trim() || value.length > 100) throw new CliError('--name must be 1-100 characters', ExitCode.usage);
    return value;
  }

  @Option({ flags: '-o, --operations <list>', description: `comma-separated; default: ${allOperations.join(',')}` })
  parseOperations(value: string): Operation[] {
    const operations = value.split(',').map((operation) => operation.trim());
    const unknown = operations.filter((operation) => !isOperation(operation));
    if (unknown.length || !operations.length) {
      throw new CliError(`unknown operation ${unknown.join(', ')}; known: ${allOperations.join(', ')}`, ExitCode.usage);
    }
    return [...new Set(operations)] as Operation[];
  }
}
