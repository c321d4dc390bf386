import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ConfigService } from '@nestjs/config';
import { LoggerModule } from 'nestjs-pino';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Echoes a well-formed `X-Request-Id` from the caller, otherwise mints one, and returns it on the response. */
export function requestId(req: IncomingMessage, res: ServerResponse): string {
  const offered = req.headers['x-request-id'];
  const id = typeof offered === 'string' && REQUEST_ID.test(offered) ? offered : randomUUID();
  res.setHeader('X-Request-Id', id);
  return id;
}

/** JSON logs through pino; credentials never reach a log line. */
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
        customProps: () => ({ app }),
        redact: ['req.headers.authorization', 'req.headers.cookie', 'res.headers["set-cookie"]'],
        autoLogging: { ignore: (req: IncomingMessage) => req.url?.startsWith('/health') ?? false },
      },
    }),
  });
}
