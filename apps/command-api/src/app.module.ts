import { Module } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { TypeOrmModule } from '@nestjs/typeorm';
import { HealthModule, loggingModule, postgresOptions, validatedConfig } from '@app/platform';
import { commandApiConfig } from './config';
import { Order } from './orders/order.entity';

@Module({
  imports: [
    validatedConfig(commandApiConfig),
    loggingModule('command-api'),
    TypeOrmModule.forRootAsync({
      inject: [ConfigService],
      useFactory: (config: ConfigService) =>
        postgresOptions({
          url: config.getOrThrow('ORDERS_DATABASE_URL'),
          applicationName: 'command-api',
          poolSize: config.getOrThrow('DATABASE_POOL_SIZE'),
          entities: [Order],
        }),
    }),
    HealthModule.register({
      database: 'orders',
      kafka: (config) => config.getOrThrow<boolean>('READINESS_REQUIRES_KAFKA'),
    }),
  ],
})
export class AppModule {}
