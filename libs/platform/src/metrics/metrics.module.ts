import { Controller, Get, Module, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import { PrometheusController, PrometheusModule } from '@willsoto/nestjs-prometheus';
import type { Response } from 'express';

/** Scraped by Prometheus, not called by API clients: kept out of the OpenAPI document, and unauthenticated. */
@ApiExcludeController()
@Controller()
export class MetricsController extends PrometheusController {
  @Get()
  override index(@Res({ passthrough: true }) response: Response): Promise<string> {
    return super.index(response);
  }
}

/**
 * `/metrics` in Prometheus text format for an HTTP app: default process metrics and every metric the
 * app registers on prom-client's default registry (configureHttpApp adds `http_request_duration_seconds`).
 */
@Module({ imports: [PrometheusModule.register({ path: '/metrics', controller: MetricsController })] })
export class MetricsModule {}
