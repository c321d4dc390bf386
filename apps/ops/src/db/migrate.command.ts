import { ConfigService } from '@nestjs/config';
import { Command, Option } from 'nest-commander';
import { DatabaseName, migrate, migrationSets } from '@app/migrations';
import { CliError, ExitCode } from '../cli-error';
import { OpsConfig } from '../config';
import { OpsCommand } from '../ops-command';

const urls: Record<DatabaseName, keyof OpsConfig> = {
  orders: 'ORDERS_DATABASE_URL',
  fulfillment: 'FULFILLMENT_DATABASE_URL',
  notifier: 'NOTIFIER_DATABASE_URL',
  receiver: 'WEBHOOK_RECEIVER_DATABASE_URL',
};

interface MigrateOptions {
  database: DatabaseName | 'all';
  json?: boolean;
}

@Command({
  name: 'db:migrate',
  description: 'Apply pending migrations to the orders, fulfillment, notifier and webhook receiver databases',
})
export class MigrateCommand extends OpsCommand<MigrateOptions> {
  protected readonly jsonShape = '{<database>: [the migrations it applied]}';

  constructor(private readonly config: ConfigService<OpsConfig, true>) {
    super();
  }

  async run(_: string[], options: MigrateOptions): Promise<void> {
    const databases = options.database === 'all' ? (Object.keys(migrationSets) as DatabaseName[]) : [options.database];
    const report: Record<string, string[]> = {};
    for (const database of databases) {
      const url = this.config.get(urls[database]) as string;
      try {
        report[database] = await migrate(database, url, () =>
          process.stderr.write(`ops: ${database}: another migrator holds the migration lock; waiting for it to finish\n`),
        );
      } catch (error) {
        throw new CliError(`migrating ${database} (${redact(url)}) failed: ${(error as Error).message}`);
      }
    }
    this.report(options, report, () =>
      Object.entries(report)
        .map(([database, applied]) => `${database}: ${applied.length ? `applied ${applied.join(', ')}` : 'up to date'}`)
        .join('\n'),
    );
  }

  @Option({
    flags: '-d, --database <name>',
    description: 'orders, fulfillment, notifier, receiver or all',
    defaultValue: 'all',
  })
  parseDatabase(value: string): string {
    if (value !== 'all' && !Object.hasOwn(migrationSets, value)) {
      throw new CliError(`--database must be one of all, ${Object.keys(migrationSets).join(', ')}`, ExitCode.usage);
    }
    return value;
  }
}

function redact(url: string): string {
  return url.replace(/\/\/([^:@/]+):[^@/]+@/, '//$1:***@');
}
