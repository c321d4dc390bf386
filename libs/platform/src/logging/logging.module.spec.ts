import { Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import express, { Request, Response } from 'express';
import { Logger } from 'pino';
import { appLogger, logOnCompletion, logRequests } from './logging.module';

type LoggedRequest = Request & { log: Logger };

/**
 * A real Express server whose every request goes through `logRequests` at `level`; `handle` answers
 * `/v1/orders`. Counts how often the request's headers are read and how many loggers are made, and
 * collects the log lines.
 */
async function serve(level: string, handle: (req: LoggedRequest, res: Response) => void) {
  const lines: Record<string, any>[] = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  const logger = appLogger('test-app', level, destination);
  let loggersMade = 0;
  const child = logger.child.bind(logger);
  logger.child = ((...args: Parameters<Logger['child']>) => (loggersMade++, child(...args))) as Logger['child'];
  let headerReads = 0;
  const app = express();
  app.use((req, _res, next) => {
    const headers = req.headers;
    Object.defineProperty(req, 'headers', { get: () => (headerReads++, headers) });
    next();
  });
  logRequests(app, logger);
  app.all(['/v1/orders', '/health/ready'], (req, res) => handle(req as LoggedRequest, res));
  const server: Server = await new Promise((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: `${base}/v1/orders`,
    base,
    lines,
    headerReads: () => headerReads,
    loggersMade: () => loggersMade,
    /** Lets the completion line (written when the response closes) reach `lines`. */
    settle: () => new Promise((resolve) => setTimeout(resolve, 20)),
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

const headers = { authorization: 'Bearer secret-key', 'x-request-id': 'req-1', 'content-type': 'application/json' };

describe('request logging', () => {
  it('does nothing per request beyond its id while the completion line is filtered out: no logger, no serialisation', async () => {
    const server = await serve('warn', (_req, res) => {
      res.end();
    });
    try {
      const answer = await fetch(server.url, { method: 'POST', headers, body: '{}' });
      await server.settle();
      expect(answer.headers.get('x-request-id')).toBe('req-1');
      expect([server.headerReads(), server.loggersMade(), server.lines]).toEqual([1, 0, []]);
    } finally {
      await server.close();
    }
  });

  it("gives a request that logs a logger of its own, with the request's id and never the request", async () => {
    const server = await serve('warn', (req, res) => {
      req.log.warn('during the request');
      req.log.warn('again');
      res.end();
    });
    try {
      await fetch(server.url, { method: 'POST', headers: { ...headers, 'x-request-id': 'has spaces' }, body: '{}' });
      await server.settle();
      expect(server.loggersMade()).toBe(1);
      expect(server.lines).toEqual([
        expect.objectContaining({ msg: 'during the request', requestId: expect.stringMatching(/^[0-9a-f-]{36}$/), app: 'test-app' }),
        expect.objectContaining({ msg: 'again', requestId: server.lines[0].requestId }),
      ]);
      expect(server.lines[0]).not.toHaveProperty('req');
    } finally {
      await server.close();
    }
  });

  it('writes the completion line with the request (credentials redacted), the response, its time and the added fields', async () => {
    const server = await serve('info', (req, res) => {
      req.log.info('during the request');
      logOnCompletion(res, { tenant: 'acme' });
      logOnCompletion(res, { outcome: 'created' });
      res.status(201).end();
    });
    try {
      // Every header that carries a credential: the API's own, a proxy's, another client's habit, a cookie.
      const credentials = { 'proxy-authorization': 'Basic secret-proxy', 'x-api-key': 'secret-api-key', cookie: 'session=secret-cookie' };
      await fetch(server.url, { method: 'POST', headers: { ...headers, ...credentials }, body: '{}' });
      await server.settle();
      expect(server.lines).toHaveLength(2);
      expect(server.lines[0]).toMatchObject({ msg: 'during the request', requestId: 'req-1', app: 'test-app' });
      expect(server.lines[0]).not.toHaveProperty('req');
      expect(server.lines[1]).toMatchObject({
        msg: 'request completed',
        level: 30,
        requestId: 'req-1',
        app: 'test-app',
        tenant: 'acme',
        outcome: 'created',
        req: {
          method: 'POST',
          url: '/v1/orders',
          headers: {
            authorization: '[Redacted]',
            'proxy-authorization': '[Redacted]',
            'x-api-key': '[Redacted]',
            cookie: '[Redacted]',
            'x-request-id': 'req-1',
          },
        },
        res: { statusCode: 201, headers: { 'x-request-id': 'req-1' } },
        responseTime: expect.any(Number),
      });
      expect(JSON.stringify(server.lines)).not.toMatch(/secret-(key|proxy|api-key|cookie)/);
    } finally {
      await server.close();
    }
  });

  it('logs a 5xx as "request errored" with an error naming the status', async () => {
    const server = await serve('info', (_req, res) => {
      res.status(503).end();
    });
    try {
      await fetch(server.url, { headers });
      await server.settle();
      expect(server.lines).toEqual([
        expect.objectContaining({
          msg: 'request errored',
          requestId: 'req-1',
          res: expect.objectContaining({ statusCode: 503 }),
          err: expect.objectContaining({ message: 'failed with status code 503' }),
        }),
      ]);
    } finally {
      await server.close();
    }
  });

  it('logs a request its client gave up on as aborted', async () => {
    let answer: () => void = () => undefined;
    const server = await serve('info', (_req, res) => {
      answer = () => res.end();
    });
    try {
      const abort = new AbortController();
      const request = fetch(server.url, { headers, signal: abort.signal }).catch(() => 'aborted');
      while (server.headerReads() === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      abort.abort();
      expect(await request).toBe('aborted');
      await server.settle();
      answer();
      expect(server.lines).toEqual([expect.objectContaining({ msg: 'request aborted', requestId: 'req-1' })]);
    } finally {
      await server.close();
    }
  });

  it('keeps probes and scrapes out of the request log but gives them a request id', async () => {
    const server = await serve('info', (_req, res) => {
      res.end();
    });
    try {
      const answer = await fetch(`${server.base}/health/ready`, { headers });
      await server.settle();
      expect([answer.headers.get('x-request-id'), server.lines]).toEqual(['req-1', []]);
    } finally {
      await server.close();
    }
  });
});
