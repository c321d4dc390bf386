import { Injectable, Module } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { InjectDataSource, TypeOrmModule } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { ApiClient } from '@app/api-clients';
import { postgresOptions } from '@app/platform';
import { CliError } from './cli-error';
import { OpsConfig } from './config';

/** The orders database, connected on first use so `--help` and `db:migrate` never need it. */
@Injectable()
export class OrdersDatabase {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  async manager(): Promise<EntityManager> {
    if (!this.dataSource.isInitialized) {
      try {
        await this.dataSource.initialize();
      } catch (error) {
        throw new CliError(`cannot reach the orders database: ${(error as Error).message}`);
      }
    }
    return this.dataSource.manager;
  }
}

@Module({
  imports: [
    TypeOrmModule.forRootAsync({
      inject: [ConfigService],
      useFactory: (config: ConfigService<OpsConfig, true>) => ({
        ...postgresOptions({
          url: config.get('ORDERS_DATABASE_URL', { infer: true }),
          applicationName: 'ops',
          poolSize: 2,
          entities: [ApiClient],
        }),
        manualInitialization: true,
      }),
    }),
  ],
  providers: [OrdersDatabase],
  exports: [OrdersDatabase],
})
export class OrdersDatabaseModule {}
