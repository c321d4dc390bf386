import { Module } from '@nestjs/common';
import { validatedConfig } from '@app/platform';
import { opsConfig } from './config';
import { MigrateCommand } from './db/migrate.command';

@Module({
  imports: [validatedConfig(opsConfig)],
  providers: [MigrateCommand],
})
export class OpsModule {}
