import 'reflect-metadata';
import { IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { Body, Controller, Get, Headers, INestApplication, Module, Post, Req, Res } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { Express, Request, Response } from 'express';
import { ExpressAdapterKeepingShapes } from './express-adapter';

@Controller('things')
class ThingsController {
  @Post()
  create(@Body() body: unknown, @Headers('x-note') note: string | undefined, @Res({ passthrough: true }) res: Response) {
    res.status(201).set('Location', '/things/1');
    return { received: body, note: note ?? null };
  }

  @Get(':id')
  read(@Req() req: Request) {
    return { id: req.params.id, host: req.get('host') !== undefined, accepts: req.accepts('json') };
  }
}

@Module({ controllers: [ThingsController] })
class ThingsModule {}

/**
 * A Nest app on `adapter`, and for each request the prototypes its request and response had when the
 * server emitted them, before Express saw them.
 */
async function serve(adapter?: ExpressAdapterKeepingShapes, options: { forceCloseConnections?: boolean } = {}) {
  const app: INestApplication = await NestFactory.create(ThingsModule, adapter ?? new ExpressAdapterKeepingShapes(), {
    logger: false,
    ...options,
  });
  await app.init();
  const server = app.getHttpServer() as Server;
  const arrived: { request: object | null; response: object | null }[] = [];
  server.prependListener('request', (req: IncomingMessage, res: ServerResponse) =>
    arrived.push({ request: Object.getPrototypeOf(req), response: Object.getPrototypeOf(res) }),
  );
  await app.listen(0, '127.0.0.1');
  const express = app.getHttpAdapter().getInstance() as Express;
  return { app, express, arrived, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

describe('ExpressAdapterKeepingShapes', () => {
  it("makes every request and response with its Express app's prototypes, so Express never changes an object's prototype", async () => {
    const { app, express, arrived, url } = await serve();
    const setPrototypeOf = jest.spyOn(Object, 'setPrototypeOf');
    try {
      await fetch(`${url}/things`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"a":1}' });
      await fetch(`${url}/things/7`);
      expect(arrived).toHaveLength(2);
      for (const { request, response } of arrived) {
        expect(request).toBe(express.request);
        expect(response).toBe(express.response);
      }
      // Express still calls setPrototypeOf for each: with the prototype already in place, nothing changes.
      const changed = setPrototypeOf.mock.calls.filter(
        ([target, prototype]) =>
          (target instanceof IncomingMessage || target instanceof ServerResponse) &&
          prototype !== express.request &&
          prototype !== express.response,
      );
      expect(changed).toEqual([]);
    } finally {
      setPrototypeOf.mockRestore();
      await app.close();
    }
  });

  it('serves Nest routes as before: bodies, route parameters, headers, status and the request and response helpers', async () => {
    const { app, url } = await serve();
    try {
      const created = await fetch(`${url}/things`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-note': 'hello' },
        body: JSON.stringify({ name: 'one', tags: ['a', 'b'] }),
      });
      expect(created.status).toBe(201);
      expect(created.headers.get('location')).toBe('/things/1');
      expect(created.headers.get('content-type')).toMatch(/^application\/json/);
      expect(await created.json()).toEqual({ received: { name: 'one', tags: ['a', 'b'] }, note: 'hello' });

      const read = await fetch(`${url}/things/42`, { headers: { accept: 'application/json' } });
      expect(read.status).toBe(200);
      expect(await read.json()).toEqual({ id: '42', host: true, accepts: 'json' });

      const missing = await fetch(`${url}/nothing-here`);
      expect(missing.status).toBe(404);
    } finally {
      await app.close();
    }
  });

  it("leaves forceCloseConnections to Nest's own server, whose objects Express re-prototypes as usual", async () => {
    const { app, express, arrived, url } = await serve(new ExpressAdapterKeepingShapes(), { forceCloseConnections: true });
    try {
      const read = await fetch(`${url}/things/3`);
      expect(await read.json()).toEqual({ id: '3', host: true, accepts: 'json' });
      expect(arrived).toEqual([{ request: IncomingMessage.prototype, response: ServerResponse.prototype }]);
      expect(arrived[0].request).not.toBe(express.request);
    } finally {
      await app.close();
    }
  });
});
