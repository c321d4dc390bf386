import { Controller, Get, Inject, ServiceUnavailableException } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { ApiOkResponse, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { HealthCheckService, HealthIndicatorFunction, TypeOrmHealthIndicator } from '@nestjs/terminus';
import { ProblemException, problemType } from '../http/problem';
import { KafkaHealthIndicator } from './kafka.health';

export const HEALTH_OPTIONS = Symbol('HEALTH_OPTIONS');

export interface HealthOptions {
  /** Name under which the TypeORM database appears in readiness, e.g. `orders`. */
  database?: string;
  /** Whether readiness requires a reachable Kafka broker. */
  kafka?: boolean;
}

export interface HealthRegistration {
  database?: string;
  /** A fixed answer, or one read from the validated config at boot. */
  kafka?: boolean | ((config: ConfigService) => boolean);
}

@ApiTags('health')
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly db: TypeOrmHealthIndicator,
    private readonly kafka: KafkaHealthIndicator,
    @Inject(HEALTH_OPTIONS) private readonly options: HealthOptions,
  ) {}

  @Get('live')
  @ApiOperation({ operationId: 'health.live', summary: 'The process is up and serving HTTP. Never depends on PostgreSQL or Kafka.' })
  @ApiOkResponse({ description: '`{"status":"ok"}`' })
  live() {
    return { status: 'ok' };
  }

  @Get('ready')
  @ApiOperation({
    operationId: 'health.ready',
    summary: 'Every dependency this app needs answers; 503 problem+json naming the ones that do not.',
  })
  @ApiOkResponse({ description: 'Every dependency answered (terminus result: `status`, `info`, `details`).' })
  @ApiResponse({
    status: 503,
    description: 'A dependency is down: `/problems/dependency-unavailable`, `unavailable` names it.',
    headers: { 'Retry-After': { description: 'Seconds to wait before asking again', schema: { type: 'integer' } } },
    content: {
      'application/problem+json': {
        schema: {
          type: 'object',
          required: ['type', 'title', 'status'],
          properties: {
            type: { type: 'string', example: '/problems/dependency-unavailable' },
            title: { type: 'string' },
            status: { type: 'integer' },
            detail: { type: 'string' },
            unavailable: { type: 'array', items: { type: 'string' } },
          },
        },
      },
    },
  })
  async ready() {
    const checks: HealthIndicatorFunction[] = [];
    const { database, kafka } = this.options;
    if (database) checks.push(() => this.db.pingCheck(database, { timeout: 2_000 }));
    if (kafka) checks.push(() => this.kafka.isHealthy('kafka'));
    try {
      return await this.health.check(checks);
    } catch (error) {
      if (!(error instanceof ServiceUnavailableException)) throw error;
      const result = error.getResponse() as { error?: Record<string, { message?: string }>; details: unknown };
      const down = Object.entries(result.error ?? {});
      throw new ProblemException(
        {
          type: problemType('dependency-unavailable'),
          title: 'Dependency unavailable',
          status: 503,
          detail: down.map(([name, info]) => `${name} is down${info.message ? `: ${info.message}` : ''}`).join('; '),
          unavailable: down.map(([name]) => name),
          checks: result.details,
        },
        { 'Retry-After': '5' },
      );
    }
  }
}
