import { Controller, Get, Inject, Logger, ServiceUnavailableException } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { ApiOkResponse, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { HealthCheckResult, HealthCheckService, HealthIndicatorFunction, TypeOrmHealthIndicator } from '@nestjs/terminus';
import { Problem, ProblemException, problemType } from '../http/problem';
import { KafkaHealthIndicator } from './kafka.health';

export const HEALTH_OPTIONS = Symbol('HEALTH_OPTIONS');

/** The readiness probe's 503: a dependency is down (listed in every app's `x-problem-types`). */
export const DEPENDENCY_UNAVAILABLE = { type: problemType('dependency-unavailable'), title: 'Dependency unavailable', status: 503 };

/** How long one readiness check answers every probe. */
const READY_ANSWER_MS = 1_000;

/** What a readiness check found: every dependency up, or the problem naming those down. */
type ReadyAnswer = { result: HealthCheckResult } | { problem: Problem };

/**
 * The 503's body. Any caller may ask: it names what is down, never why (driver messages carry hosts,
 * ports, users). The reason is in the log, for the operator.
 */
function notReady(down: Record<string, unknown>, details: Record<string, { status: string }>): Problem {
  return {
    ...DEPENDENCY_UNAVAILABLE,
    detail: Object.keys(down)
      .map((name) => `${name} is down`)
      .join('; '),
    unavailable: Object.keys(down),
    checks: Object.fromEntries(Object.entries(details).map(([name, check]) => [name, { status: check.status }])),
  };
}

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
  private readonly logger = new Logger('Health');
  /** What the last readiness check found down, so each outage and recovery is logged once, not on every probe. */
  private lastDown = '';
  /** The check probes share until `until`. */
  private recent?: { until: number; answer: Promise<ReadyAnswer> };

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
    // Any caller may ask, as often as it likes: probes share one check at a time, and its answer for a
    // second (READY_ANSWER_MS), so a flood of probes costs the database one ping a second, not a
    // connection of the pool each.
    const now = Date.now();
    if (!this.recent || now >= this.recent.until) this.recent = { until: now + READY_ANSWER_MS, answer: this.check() };
    const answer = await this.recent.answer;
    if ('problem' in answer) throw new ProblemException(answer.problem, { 'Retry-After': '5' });
    return answer.result;
  }

  private async check(): Promise<ReadyAnswer> {
    const checks: HealthIndicatorFunction[] = [];
    const { database, kafka } = this.options;
    if (database) checks.push(() => this.db.pingCheck(database, { timeout: 2_000 }));
    if (kafka) checks.push(() => this.kafka.isHealthy('kafka'));
    try {
      const result = await this.health.check(checks);
      this.reportDown({});
      return { result };
    } catch (error) {
      if (!(error instanceof ServiceUnavailableException)) throw error;
      const result = error.getResponse() as { error?: Record<string, { message?: string }>; details: Record<string, { status: string }> };
      const down = result.error ?? {};
      this.reportDown(down);
      return { problem: notReady(down, result.details) };
    }
  }

  private reportDown(down: Record<string, { message?: string }>): void {
    const now = Object.keys(down).sort().join(',');
    if (now === this.lastDown) return;
    if (now)
      this.logger.warn(
        { down: Object.fromEntries(Object.entries(down).map(([name, info]) => [name, info.message ?? 'down'])) },
        `not ready: ${now} down`,
      );
    else this.logger.log(`ready again: ${this.lastDown} answer`);
    this.lastDown = now;
  }
}
