import { Module } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { TypeOrmModule } from '@nestjs/typeorm';
import { HealthModule, loggingModule, postgresOptions, validatedConfig } from '@app/platform';
import { NotifierConfig, notifierConfig } from './config';
import { NotifierConsumer } from './webhooks/notifier-consumer.service';
import { WebhookDispatcher } from './webhooks/webhook-dispatcher.service';

@Module({
  imports: [
    validatedConfig(notifierConfig),
    loggingModule('notifier'),
    TypeOrmModule.forRootAsync({
      inject: [ConfigService],
      useFactory: (config: ConfigService<NotifierConfig, true>) =>
        postgresOptions({
          url: config.get('NOTIFIER_DATABASE_URL', { infer: true }),
          applicationName: 'notifier',
          poolSize: config.get('DATABASE_POOL_SIZE', { infer: true }),
          statementTimeoutMs: 30_000,
        }),
    }),
    HealthModule.register({ database: 'notifier', kafka: true }),
  ],
  providers: [WebhookDispatcher, NotifierConsumer],
})
export class AppModule {}
