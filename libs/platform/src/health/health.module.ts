import { DynamicModule, Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { ConfigService } from '@nestjs/config';
import { HEALTH_OPTIONS, HealthController, HealthOptions, HealthRegistration } from './health.controller';
import { KafkaHealthIndicator } from './kafka.health';

/** `/health/live` and `/health/ready` for an app, checking the dependencies it declares. */
@Module({})
export class HealthModule {
  static register({ database, kafka = false }: HealthRegistration): DynamicModule {
    const options = {
      provide: HEALTH_OPTIONS,
      inject: [ConfigService],
      useFactory: (config: ConfigService): HealthOptions => ({
        database,
        kafka: typeof kafka === 'function' ? kafka(config) : kafka,
      }),
    };
    return {
      module: HealthModule,
      imports: [TerminusModule.forRoot({ logger: false })],
      controllers: [HealthController],
      providers: [KafkaHealthIndicator, options],
    };
  }
}
