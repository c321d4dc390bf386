import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ConfigService } from '@nestjs/config';
import { LoggerModule } from 'nestjs-pino';
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
 * JSON logs through pino; credentials never reach a log line. Every line logged during a request
 * carries its `requestId`; the completion line also carries the request, the response and what
 * handlers added with `logOnCompletion`. Fields: docs/observability.md.
 *
 * Per request this costs one child logger (for `requestId`): the request is serialised only into the
 * completion line, and only when its level is enabled.
 */
export function loggingModule(app: string) {
  return LoggerModule.forRootAsync({
    inject: [ConfigService],
    useFactory: (config: ConfigService) => ({
      pinoHttp: {
        name: app,
        base: { pid: process.pid, hostname: hostname(), app },
        level: config.get<string>('LOG_LEVEL') ?? 'info',
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
      },
    }),
  });
}
