import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { pinoHttp } from 'pino-http';
import { logOnCompletion, requestLogging } from './logging.module';

type LoggedRequest = IncomingMessage & { log: { info(message: string): void; warn(message: string): void } };

/**
 * A real HTTP server whose every request goes through `requestLogging(level)`; `handle` answers it.
 * Counts how often the logging middleware reads the request's headers, and collects the log lines.
 */
async function serve(level: string, handle: (req: LoggedRequest, res: ServerResponse) => void) {
  const lines: Record<string, any>[] = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  const middleware = pinoHttp(requestLogging('test-app', level, destination));
  let headerReads = 0;
  const server: Server = createServer((req, res) => {
    const headers = req.headers;
    Object.defineProperty(req, 'headers', {
      get: () => {
        headerReads++;
        return headers;
      },
    });
    middleware(req, res, () => handle(req as LoggedRequest, res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/orders`;
  return { url, lines, headerReads: () => headerReads, close: () => new Promise((resolve) => server.close(resolve)) };
}

const headers = { authorization: 'Bearer secret-key', 'x-request-id': 'req-1', 'content-type': 'application/json' };

describe('request logging', () => {
  it('serialises the request only into the completion line: not at all while that line is filtered out', async () => {
    const server = await serve('warn', (req, res) => {
      req.log.warn('during the request');
      res.end();
    });
    try {
      await fetch(server.url, { method: 'POST', headers, body: '{}' });
      // Read once, for the request id; a child logger bound to the whole request would serialise them again.
      expect(server.headerReads()).toBe(1);
      expect(server.lines).toEqual([expect.objectContaining({ msg: 'during the request', requestId: 'req-1' })]);
      expect(server.lines[0]).not.toHaveProperty('req');
    } finally {
      await server.close();
    }
  });

  it('writes the completion line with the request (credentials redacted), the response and the added fields', async () => {
    const server = await serve('info', (req, res) => {
      req.log.info('during the request');
      logOnCompletion(res, { tenant: 'acme', outcome: 'created' });
      res.statusCode = 201;
      res.end();
    });
    try {
      await fetch(server.url, { method: 'POST', headers, body: '{}' });
      await new Promise((resolve) => setImmediate(resolve)); // the completion line is written on 'finish'
      expect(server.lines).toHaveLength(2);
      expect(server.lines[0]).toMatchObject({ msg: 'during the request', requestId: 'req-1', app: 'test-app' });
      expect(server.lines[0]).not.toHaveProperty('req');
      expect(server.lines[1]).toMatchObject({
        msg: 'request completed',
        requestId: 'req-1',
        app: 'test-app',
        tenant: 'acme',
        outcome: 'created',
        req: { method: 'POST', url: '/v1/orders', headers: { authorization: '[Redacted]', 'x-request-id': 'req-1' } },
        res: { statusCode: 201 },
      });
      expect(JSON.stringify(server.lines)).not.toContain('secret-key');
    } finally {
      await server.close();
    }
  });
});
