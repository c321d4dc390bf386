import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { INestApplication } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { LoggerModule, Params, PARAMS_PROVIDER_TOKEN } from 'nestjs-pino';
import { DestinationStream, Logger, pino } from 'pino';
import { Options, pinoHttp } from 'pino-http';
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

const completionFields = (res: ServerResponse) => (res as WithCompletionFields)[COMPLETION_FIELDS];

/** Scrapes and probes every few seconds would drown the request log. */
const UNLOGGED = /^\/(health|metrics)(\/|\?|$)/;

/**
 * JSON logs through pino; credentials never reach a log line. The lines an app logs about a request
 * (`req.log`: the completion line, a 5xx's error line) carry its `requestId`; the completion line also
 * carries the request, the response and what handlers added with `logOnCompletion`. Fields:
 * docs/observability.md. `mountRequestLogging` puts pino-http in front of the app's routes.
 *
 * nestjs-pino's own request middleware is not mounted (`forRoutes: []`): it binds every request's
 * logger in an AsyncLocalStorage so that any logger anywhere could find it, and on Node 20 that storage
 * runs a promise hook for every promise of every request (every `await`): not mounting it took 13 %
 * off the instructions a command costs the API (callgrind, first executions and replays alike).
 * Nest's loggers and `PinoLogger` log without a request: a handler that logs about its request uses
 * `req.log`. Per request this costs one child logger (for `requestId`): the request is serialised only
 * into the completion line, and only when its level is enabled (see
 * `withoutWholeRequestChild`).
 */
export function loggingModule(app: string) {
  return LoggerModule.forRootAsync({
    inject: [ConfigService],
    useFactory: (config: ConfigService): Params => ({
      pinoHttp: requestLogging(app, config.get<string>('LOG_LEVEL') ?? 'info'),
      forRoutes: [],
    }),
  });
}

/** pino-http, with `loggingModule`'s options, as Express middleware ahead of everything the app routes. */
export function mountRequestLogging(app: INestApplication): void {
  const { pinoHttp: options } = app.get<Params>(PARAMS_PROVIDER_TOKEN);
  app.use(pinoHttp(options as Options));
}

/** The pino-http options of `loggingModule`, writing to `destination` (standard output when absent). */
export function requestLogging(app: string, level: string, destination?: DestinationStream): Options {
  const root = pino({ name: app, base: { pid: process.pid, hostname: hostname(), app }, level }, destination);
  return {
    logger: withoutWholeRequestChild(root),
    genReqId: requestId,
    customAttributeKeys: { reqId: 'requestId' },
    // Database errors log their diagnosis, never their statements' values (error-serializer.ts).
    serializers: { err: serializeError },
    quietReqLogger: true,
    quietResLogger: true,
    customSuccessObject: (req: IncomingMessage, res: ServerResponse, fields: object) => ({ req, ...fields, ...completionFields(res) }),
    customErrorObject: (req: IncomingMessage, res: ServerResponse, _error: Error, fields: object) => ({
      req,
      ...fields,
      ...completionFields(res),
    }),
    redact: [
      'req.headers.authorization',
      'req.headers["proxy-authorization"]',
      'req.headers["x-api-key"]',
      'req.headers.cookie',
      'res.headers["set-cookie"]',
    ],
    autoLogging: { ignore: (req: IncomingMessage) => UNLOGGED.test(req.url ?? '') },
  };
}

/**
 * pino-http binds a child logger to the whole request on every request (`child({ req })`), and pino
 * serialises and redacts the request into JSON the moment a child is made. With `quietReqLogger` and
 * `quietResLogger`, as here, nothing ever logs through that child (req.log and res.log are the
 * `requestId` child), so it was ~18 µs of CPU per request for nothing (measured). For a child bound to
 * `req` alone, this root and every logger made from it (pino's children inherit from their parent)
 * return the parent instead; every other child is pino's own. Turn off either quiet option and
 * req.log / res.log would lose `req`: keep them together.
 */
function withoutWholeRequestChild(root: Logger): Logger {
  const child = root.child;
  const skipping = function (this: Logger, bindings: Record<string, unknown>, options?: object) {
    if (options === undefined && isWholeRequest(bindings)) return this;
    return child.call(this, bindings, options);
  };
  return Object.assign(root, { child: skipping as Logger['child'] });
}

function isWholeRequest(bindings: Record<string, unknown>): boolean {
  for (const key in bindings) if (key !== 'req') return false;
  return 'req' in bindings;
}
