import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ConfigService } from '@nestjs/config';
import { LoggerModule } from 'nestjs-pino';

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

/** Scrapes and probes every few seconds would drown the request log. */
const UNLOGGED = /^\/(health|metrics)(\/|\?|$)/;

/**
 * JSON logs through pino; credentials never reach a log line. Every line logged during a request
 * carries its `requestId`; the completion line also carries what handlers assigned. Fields: docs/observability.md.
 */
export function loggingModule(app: string) {
  return LoggerModule.forRootAsync({
    inject: [ConfigService],
    useFactory: (config: ConfigService) => ({
      // Fields a handler assigns (tenant, operation, idempotency outcome) also land on the request's completion line.
      assignResponse: true,
      pinoHttp: {
        name: app,
        level: config.get<string>('LOG_LEVEL') ?? 'info',
        genReqId: requestId,
        customProps: (req: IncomingMessage) => ({ app, requestId: req.id }),
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
