import { createServer, IncomingMessage, ServerResponse } from 'node:http';
import type { NestApplicationOptions } from '@nestjs/common';
import { ExpressAdapter } from '@nestjs/platform-express';
import type { Express, Response } from 'express';

/**
 * Nest's Express adapter, except that the HTTP server makes each request and response an Express
 * request and response from the start.
 *
 * Express gives every request and response its app's prototype (`app.request`, `app.response`, where
 * `req.get`, `res.json` and the rest live) by `Object.setPrototypeOf` as each request arrives. An object
 * whose prototype changes after it was made loses V8's optimised property access, in our code and in
 * Node's HTTP internals alike (expressjs/express#5998). Node's server takes the classes it constructs
 * (its `IncomingMessage` and `ServerResponse` options): given constructors whose instances already have
 * the app's prototypes, Express's `setPrototypeOf` finds the prototype in place and changes nothing.
 * Measured on this project's 2-CPU machines (docs/performance.md): a bare Nest 11 JSON POST 167-319 µs
 * of CPU per request before, 64-150 µs after; the command-api 0.40 -> 0.20 ms per replay and
 * 0.79 -> 0.41 ms per created order. Requests that Express hands to a mounted sub-app change prototype
 * there, as before; our apps mount none.
 *
 * HTTPS and `forceCloseConnections` take Nest's own path (none of our apps uses them).
 */
export class ExpressAdapterKeepingShapes extends ExpressAdapter {
  override initHttpServer(options: NestApplicationOptions): void {
    if (options?.httpsOptions || options?.forceCloseConnections) return super.initHttpServer(options);
    const app = this.getInstance<Express>();
    this.httpServer = createServer(
      {
        IncomingMessage: constructing(IncomingMessage, app.request),
        ServerResponse: constructing(ServerResponse, app.response),
      },
      app,
    );
  }

  /**
   * A handler's plain object or array, answering a request that is neither GET nor HEAD (our commands),
   * is written as Express's `res.json` writes it, without the work that cannot change the outcome there:
   * `res.json` sets `Content-Type` through a MIME lookup, `res.send` parses and formats it again to add
   * the charset and looks the type up once more, then asks whether the request is fresh (only GET and
   * HEAD can be). The same bytes: JSON.stringify, `application/json; charset=utf-8`, Content-Length.
   * Anything else (a type already set, an ETag function, a status without a body, Nest's other cases)
   * takes Nest's and Express's own path. Measured (docs/performance.md): the command-api's CPU per
   * replay 0.21-0.25 -> 0.18-0.19 ms.
   */
  override reply(response: Response, body: unknown, statusCode?: number): unknown {
    if (!isPlainJson(body) || !writesJsonItself(response)) return super.reply(response, body, statusCode);
    if (statusCode) response.status(statusCode);
    if (STATUSES_WITHOUT_BODY.has(response.statusCode)) return super.reply(response, body, undefined);
    const json = JSON.stringify(body);
    response.setHeader('Content-Type', 'application/json; charset=utf-8');
    response.setHeader('Content-Length', String(Buffer.byteLength(json, 'utf8')));
    return response.end(json, 'utf8');
  }
}

/** Statuses whose body Express strips (and the headers that describe it). */
const STATUSES_WITHOUT_BODY = new Set([204, 205, 304]);

/** What Express's `res.send` hands to `res.json`, short of values with a prototype of their own (Buffers, Errors, files). */
function isPlainJson(body: unknown): body is object {
  if (body === null || typeof body !== 'object') return false;
  const prototype = Object.getPrototypeOf(body);
  return prototype === Object.prototype || prototype === Array.prototype || prototype === null;
}

/** A request that can be neither HEAD (no body) nor fresh (GET and HEAD only), no type chosen yet, Express's JSON settings untouched. */
function writesJsonItself(response: Response): boolean {
  const method = response.req.method;
  if (method === 'GET' || method === 'HEAD' || response.hasHeader('Content-Type')) return false;
  const app = response.app;
  return !app.get('etag fn') && !app.get('json replacer') && !app.get('json spaces') && !app.get('json escape');
}

/**
 * A constructor for `base` whose instances are made with `prototype` (which must inherit from
 * `base.prototype`). It calls `base` on the new object, as the pre-class constructors of Node's HTTP
 * module are meant to be extended: `Reflect.construct(base, args, Constructor)` does the same and
 * measured 12-16 µs per request in the two constructors alone.
 */
function constructing<T extends typeof IncomingMessage | typeof ServerResponse>(base: T, prototype: object): T {
  if (!(prototype instanceof base)) throw new TypeError(`the prototype must inherit from ${base.name}`);
  const init = base as unknown as (this: object, ...args: unknown[]) => void;
  function Constructor(this: object, ...args: unknown[]): void {
    init.apply(this, args);
  }
  Constructor.prototype = prototype;
  return Constructor as unknown as T;
}
