import { Module } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ApiClient } from '@app/api-clients';
import { HealthModule, loggingModule, postgresOptions, validatedConfig } from '@app/platform';
import { AuthModule } from './auth/auth.module';
import { CommandApiConfig, commandApiConfig } from './config';
import { Order } from './orders/order.entity';
import { OrdersModule } from './orders/orders.module';
import { ReceiptsModule } from './receipts/receipts.module';

@Module({
  imports: [
    validatedConfig(commandApiConfig),
    loggingModule('command-api'),
    TypeOrmModule.forRootAsync({
      inject: [ConfigService],
      useFactory: (config: ConfigService<CommandApiConfig, true>) =>
        postgresOptions({
          url: config.get('ORDERS_DATABASE_URL', { infer: true }),
          applicationName: 'command-api',
          poolSize: config.get('DATABASE_POOL_SIZE', { infer: true }),
          entities: [Order, ApiClient],
          // Bounds every lock wait; on the receipt claim it is the wait for a duplicate in flight (-> 409).
          lockTimeoutMs: config.get('IDEMPOTENCY_LOCK_TIMEOUT_MS', { infer: true }),
          statementTimeoutMs: config.get('DATABASE_STATEMENT_TIMEOUT_MS', { infer: true }),
          // A command's transaction in three round trips instead of five (inTransaction).
          pipeline: true,
        }),
    }),
    HealthModule.register({
      database: 'orders',
      kafka: (config) => config.getOrThrow<boolean>('READINESS_REQUIRES_KAFKA'),
    }),
    AuthModule,
    OrdersModule,
    ReceiptsModule,
  ],
})
export class AppModule {}
