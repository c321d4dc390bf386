import { INestApplication, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DocumentBuilder, OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import { Logger } from 'nestjs-pino';
import { DataSource } from 'typeorm';
import { z } from 'zod';
import { ConfigError, parseConfig } from './config/parse-config';
import { keepLateConnectionErrorsFromCrashing } from './database/database-errors';
import { answerProtocolErrorsAsProblems, ArrivalBounds, boundRequestArrival } from './http/client-error';
import { closeConnectionsOnShutdown } from './http/close-on-shutdown';
import { ExpressAdapterKeepingShapes } from './http/express-adapter';
import { ProblemDetailsFilter, ProblemMapper } from './http/problem-details.filter';
import { PROBLEM_CONTENT_TYPE } from './http/problem';
import { mountRequestLogging, REQUEST_ID, REQUEST_ID_HEADER } from './logging/logging.module';
import { serveManagement } from './management';
import { observeHttpDuration } from './metrics/http-metrics';

/** What every HTTP app's configuration has, whatever else it holds. */
type CommonConfig = { SHUTDOWN_TIMEOUT_SECONDS: number } & ArrivalBounds;

export interface HttpAppOptions<S extends z.ZodType<CommonConfig>> {
  name: string;
  module: Type<unknown>;
  schema: S;
  /**
   * Picks the listening address out of the validated config; with `managementPort`, `/metrics` and
   * `/docs` are served there instead of on the public port (serveManagement).
   */
  listen: (config: z.infer<S>) => { host: string; port: number; managementPort?: number };
  /** Adds the app's own OpenAPI details; `/docs` is served for every HTTP app. */
  describe?: (builder: DocumentBuilder) => DocumentBuilder;
  /** Maps the app's own error types to problems (database outages are mapped for every app). */
  problems?: ProblemMapper[];
}

/**
 * Validates the environment, starts the app with JSON logs, problem+json errors, `/docs` and
 * graceful shutdown on SIGTERM/SIGINT (bounded by SHUTDOWN_TIMEOUT_SECONDS). A bad config exits 1
 * with one line naming the variable.
 */
export async function runHttpApp<S extends z.ZodType<CommonConfig>>(options: HttpAppOptions<S>): Promise<INestApplication> {
  const config = configOrExit(options.name, arrivalBoundsInOrder(options.schema));
  try {
    return await startHttpApp(options, config);
  } catch (error) {
    process.stderr.write(`${options.name}: failed to start: ${(error as Error).message}\n`);
    process.exit(1);
  }
}

async function startHttpApp<S extends z.ZodType<CommonConfig>>(options: HttpAppOptions<S>, config: z.infer<S>) {
  const app = await NestFactory.create(options.module, new ExpressAdapterKeepingShapes(), {
    bufferLogs: true,
    abortOnError: false,
    // No app gets Nest's body parsers: a route that takes a body reads it itself, the command API's only
    // after authentication (JsonBodyGuard), the webhook receiver's as the exact bytes its signature covers
    // (raw-body.ts). Elsewhere a parser would only judge bodies no route takes, and answer 500 for one
    // over its limit.
    bodyParser: false,
  });
  const { host, port, managementPort } = options.listen(config);
  const document = configureHttpApp(app, { ...options, serveDocs: managementPort === undefined });
  guardDatabaseConnections(app);
  exitIfShutdownOutlasts(config.SHUTDOWN_TIMEOUT_SECONDS, app.get(Logger));
  answerProtocolErrorsAsProblems(app.getHttpServer());
  boundRequestArrival(app.getHttpServer(), config);
  closeConnectionsOnShutdown(app.getHttpServer());
  await app.listen(port, host);
  if (managementPort !== undefined) {
    const management = await serveManagement(app, { host, port: managementPort, document, bounds: config });
    app.get(Logger).log(`${options.name} listening on ${await app.getUrl()}, /metrics and /docs on ${await management.getUrl()}`);
  } else {
    app.get(Logger).log(`${options.name} listening on ${await app.getUrl()}`);
  }
  return app;
}

/** The app's schema, refusing a bound on a request's head above the bound on the whole request. */
function arrivalBoundsInOrder<S extends z.ZodType<CommonConfig>>(schema: S): S {
  return schema.refine((c) => c.HTTP_HEADERS_TIMEOUT_SECONDS <= c.HTTP_REQUEST_TIMEOUT_SECONDS, {
    path: ['HTTP_HEADERS_TIMEOUT_SECONDS'],
    message: 'must not exceed HTTP_REQUEST_TIMEOUT_SECONDS (the head is part of the request)',
  });
}

/**
 * A graceful shutdown waits for the work in flight, and that work may wait on a dependency that has
 * stopped answering (a network partition: no error, no reset, no answer). From the first SIGTERM or
 * SIGINT, Nest's shutdown hooks get `seconds`; past that the process logs why and exits 1 rather than
 * live on until something kills it without a word. Everything the service promises holds across such
 * an exit, as across a crash: a relay's unmarked batch is published again, a consumer's uncommitted
 * offsets are read again.
 */
function exitIfShutdownOutlasts(seconds: number, logger: Logger): void {
  const arm = (signal: NodeJS.Signals) =>
    setTimeout(() => {
      logger.error(`shutdown did not finish within ${seconds} s of ${signal} (SHUTDOWN_TIMEOUT_SECONDS); exiting`);
      process.exit(1);
    }, seconds * 1000).unref();
  // Once each: after its hooks Nest re-raises the signal, which must then end the process (Nest itself
  // ignores further signals while its hooks run: the deadline is what ends a shutdown that hangs).
  process.once('SIGTERM', arm);
  process.once('SIGINT', arm);
}

/** Every app with a database: a connection whose session ends just as it is handed out must not kill the process. */
function guardDatabaseConnections(app: INestApplication): void {
  let dataSource: DataSource;
  try {
    dataSource = app.get(DataSource, { strict: false });
  } catch {
    return; // an app without a database
  }
  keepLateConnectionErrorsFromCrashing(dataSource);
}

/**
 * What every HTTP app gets: pino logs, request durations, problem+json errors, shutdown hooks, and its
 * OpenAPI document (returned), served at `/docs` on this app unless `serveDocs` is false (the
 * management port serves it then).
 */
export function configureHttpApp(
  app: INestApplication,
  options: Pick<HttpAppOptions<z.ZodType<CommonConfig>>, 'name' | 'describe' | 'problems'> & { serveDocs?: boolean },
): OpenAPIObject {
  app.useLogger(app.get(Logger));
  const express = app.getHttpAdapter().getInstance() as { disable?: (setting: string) => void };
  express.disable?.('x-powered-by');
  // Express hashes every response body into a weak ETag, POSTs included: a SHA-1 per answer for
  // conditional GETs nobody sends to a command API (no client here revalidates; the docs promise none).
  express.disable?.('etag');
  // Plain Express middleware ahead of every route: unmatched requests are logged and timed too (route "unmatched").
  mountRequestLogging(app);
  app.use(observeHttpDuration);
  app.useGlobalFilters(new ProblemDetailsFilter(options.problems));
  app.enableShutdownHooks();
  const builder = new DocumentBuilder().setTitle(options.name).setVersion('1');
  const document = withRequestIds(errorsAsProblemJson(SwaggerModule.createDocument(app, (options.describe?.(builder) ?? builder).build())));
  if (options.serveDocs ?? true) SwaggerModule.setup('docs', app, document);
  return document;
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch'] as const;

/** Every request may send `X-Request-Id` and every response carries one (loggingModule): say so on every operation. */
function withRequestIds(document: OpenAPIObject): OpenAPIObject {
  for (const path of Object.values(document.paths)) {
    for (const method of METHODS) {
      const operation = path[method];
      if (!operation) continue;
      operation.parameters = [
        ...(operation.parameters ?? []),
        {
          name: REQUEST_ID_HEADER,
          in: 'header',
          required: false,
          description: 'Your id for this request (1-128 of A-Z a-z 0-9 . _ : -), logged and echoed; otherwise one is generated.',
          schema: { type: 'string', pattern: REQUEST_ID.source },
        },
      ];
      for (const response of Object.values(operation.responses ?? {})) {
        if (!response || '$ref' in response) continue;
        response.headers = {
          ...response.headers,
          [REQUEST_ID_HEADER]: {
            description: 'The request id: yours if it was well-formed, otherwise generated. Quote it when reporting a problem.',
            schema: { type: 'string' },
          },
        };
      }
    }
  }
  return document;
}

/** Every error is sent as application/problem+json (ProblemDetailsFilter): document it so, not as application/json. */
function errorsAsProblemJson(document: OpenAPIObject): OpenAPIObject {
  for (const path of Object.values(document.paths)) {
    for (const method of METHODS) {
      for (const [status, response] of Object.entries(path[method]?.responses ?? {})) {
        const content = response && 'content' in response ? response.content : undefined;
        if (Number(status) < 400 || !content?.['application/json']) continue;
        content[PROBLEM_CONTENT_TYPE] = content['application/json'];
        delete content['application/json'];
      }
    }
  }
  return document;
}

/** Validates the environment before anything starts; prints one line and exits 1 when it is wrong. */
export function configOrExit<S extends z.ZodType>(name: string, schema: S): z.infer<S> {
  try {
    return parseConfig(schema, process.env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`${name}: ${error.message}\n`);
    process.exit(1);
  }
}
