import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { INestApplication } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import type { Express, NextFunction, Request, Response } from 'express';
import { LoggerModule, Params, PARAMS_PROVIDER_TOKEN } from 'nestjs-pino';
import { DestinationStream, Logger, pino, stdSerializers } from 'pino';
import { serializeError } from './error-serializer';

export const REQUEST_ID_HEADER = 'X-Request-Id';
/** What a caller's request id may look like; anything else (too long, spaces, control characters) is replaced. */
export const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Echoes a well-formed `X-Request-Id` from the caller, otherwise mints one, and returns it on the response. */
export function requestId(req: IncomingMessage, res: ServerResponse): string {
  const offered = req.headers['x-request-id'];
  const id = typeof offered === 'string' && REQUEST_ID.test(offered) ? offered : randomUUID();
  res.setHeader(REQUEST_ID_HEADER, id);
  return id;
}

const COMPLETION_FIELDS = Symbol('fields for the request completion line');
type WithCompletionFields = ServerResponse & { [COMPLETION_FIELDS]?: Record<string, unknown> };

/**
 * Adds `fields` to the request's completion line (tenant, operation, outcome, …). They are kept on the
 * response and read once, when that line is written: no child logger per field, nothing serialised
 * while the level filters the line out.
 */
export function logOnCompletion(res: ServerResponse, fields: Record<string, unknown>): void {
  const target = res as WithCompletionFields;
  target[COMPLETION_FIELDS] = Object.assign(target[COMPLETION_FIELDS] ?? {}, fields);
}

/**
 * JSON logs through pino; credentials never reach a log line, database errors log their diagnosis,
 * never their statements' values (error-serializer.ts). Fields: docs/observability.md.
 *
 * nestjs-pino gives Nest's loggers and `PinoLogger` this logger; its request middleware is not mounted
 * (`forRoutes: []`): it binds every request's logger in an AsyncLocalStorage, and on Node 20 that
 * storage runs a promise hook for every `await` of every request (13 % of the instructions a command
 * cost the API). Requests are logged by `logRequests`, mounted by `mountRequestLogging`.
 */
export function loggingModule(app: string) {
  return LoggerModule.forRootAsync({
    inject: [ConfigService],
    useFactory: (config: ConfigService): Params => ({
      // nestjs-pino derives its logger through pino-http, which puts pino's own `err` serializer on it
      // unless one is given: given again here, Nest's error lines keep statements' values out too.
      pinoHttp: { logger: appLogger(app, config.get<string>('LOG_LEVEL') ?? 'info'), serializers: { err: serializeError } },
      forRoutes: [],
    }),
  });
}

/** The app's root logger, writing to `destination` (standard output when absent). */
export function appLogger(app: string, level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      name: app,
      base: { pid: process.pid, hostname: hostname(), app },
      level,
      serializers: { err: serializeError, req: stdSerializers.req, res: stdSerializers.res },
      redact: [
        'req.headers.authorization',
        'req.headers["proxy-authorization"]',
        'req.headers["x-api-key"]',
        'req.headers.cookie',
        'res.headers["set-cookie"]',
      ],
    },
    destination,
  );
}

/** `logRequests` with `loggingModule`'s logger, ahead of everything the app routes. */
export function mountRequestLogging(app: INestApplication): void {
  const { pinoHttp } = app.get<Params>(PARAMS_PROVIDER_TOKEN);
  logRequests(app.getHttpAdapter().getInstance() as Express, (pinoHttp as { logger: Logger }).logger);
}

/** Scrapes and probes every few seconds would drown the request log. */
const UNLOGGED = /^\/(health|metrics)(\/|\?|$)/;
const REQUEST_LOG = Symbol('the request logger');
type LoggedRequest = Request & { id?: string; [REQUEST_LOG]?: Logger };

/**
 * Every request to `express` gets its request id (`req.id`, the `X-Request-Id` response header), a
 * completion line when its response is done (while `info` is enabled), and `req.log`: a logger whose
 * lines carry the `requestId`, made the first time a request logs (the 5xx error line), not for every
 * request. Nothing else is done per request: a middleware that did more (pino-http: a child logger
 * per request, three listeners, a list of loggers) cost 14 % of the instructions of a replay.
 */
export function logRequests(express: Express, logger: Logger): void {
  Object.defineProperty(express.request, 'log', {
    configurable: true,
    get(this: LoggedRequest): Logger {
      return (this[REQUEST_LOG] ??= logger.child({ requestId: this.id }));
    },
  });
  express.use((request: Request, res: Response, next: NextFunction) => {
    const req = request as LoggedRequest;
    req.id = requestId(req, res);
    if (logger.isLevelEnabled('info') && !UNLOGGED.test(req.url)) {
      const started = Date.now();
      res.once('close', () => logCompletion(req, res, Date.now() - started));
    }
    next();
  });
}

function logCompletion(req: LoggedRequest, res: Response, responseTime: number): void {
  const fields = (res as WithCompletionFields)[COMPLETION_FIELDS];
  const log = (req as { log: Logger }).log;
  if (res.statusCode >= 500) {
    log.info({ req, res, err: new Error(`failed with status code ${res.statusCode}`), responseTime, ...fields }, 'request errored');
  } else {
    log.info({ req, res, responseTime, ...fields }, res.writableFinished ? 'request completed' : 'request aborted');
  }
}
