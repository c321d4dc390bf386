import { INestApplication, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import { Logger } from 'nestjs-pino';
import { answerProtocolErrorsAsProblems, ArrivalBounds, boundRequestArrival } from './http/client-error';
import { closeConnectionsOnShutdown } from './http/close-on-shutdown';
import { ExpressAdapterKeepingShapes } from './http/express-adapter';
import { ProblemDetailsFilter } from './http/problem-details.filter';
import { MetricsModule } from './metrics/metrics.module';

@Module({ imports: [MetricsModule] })
class ManagementModule {}

/**
 * The management port of an HTTP app: `/metrics` (Prometheus text) and `/docs` (the OpenAPI UI,
 * `/docs-json`), on an address of their own so that the public port serves only the API and `/health`
 * (which load balancers probe). Firewall it like any internal port. Closes when the app closes. Its
 * errors are problem+json, as the app's are.
 */
export async function serveManagement(
  app: INestApplication,
  { host, port, document, bounds }: { host: string; port: number; document: OpenAPIObject; bounds: ArrivalBounds },
): Promise<INestApplication> {
  const management = await NestFactory.create(ManagementModule, new ExpressAdapterKeepingShapes(), {
    bufferLogs: true,
    abortOnError: false,
    bodyParser: false, // no route here takes a body (as in startHttpApp)
  });
  management.useLogger(app.get(Logger));
  const express = management.getHttpAdapter().getInstance() as { disable?: (setting: string) => void };
  express.disable?.('x-powered-by');
  // Its errors in the API's shape too: problem+json of the types the document lists.
  management.useGlobalFilters(new ProblemDetailsFilter());
  answerProtocolErrorsAsProblems(management.getHttpServer());
  boundRequestArrival(management.getHttpServer(), bounds);
  closeConnectionsOnShutdown(management.getHttpServer());
  // "Try it out" goes to the API's own address, not to this port.
  SwaggerModule.setup('docs', management, { ...document, servers: [{ url: await app.getUrl() }] });
  await management.listen(port, host);
  (app.getHttpServer() as NodeJS.EventEmitter).once('close', () => void management.close());
  return management;
}
