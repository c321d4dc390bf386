import { Module } from '@nestjs/common';
import { validatedConfig } from '@app/platform';
import { ClientsCreateCommand } from './clients/clients-create.command';
import { ClientsListCommand } from './clients/clients-list.command';
import { ClientsRevokeCommand } from './clients/clients-revoke.command';
import { opsConfig } from './config';
import { ConsumerDatabases } from './consumer-databases';
import { MigrateCommand } from './db/migrate.command';
import { OrdersDatabaseModule } from './orders-database.module';
import { ReceiptsSweepCommand } from './receipts/receipts-sweep.command';

@Module({
  imports: [validatedConfig(opsConfig), OrdersDatabaseModule],
  providers: [
    ConsumerDatabases,
    MigrateCommand,
    ClientsCreateCommand,
    ClientsListCommand,
    ClientsRevokeCommand,
    ReceiptsSweepCommand,
  ],
})
export class OpsModule {}
