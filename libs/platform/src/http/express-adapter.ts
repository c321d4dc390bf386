import { createServer, IncomingMessage, ServerResponse } from 'node:http';
import type { NestApplicationOptions } from '@nestjs/common';
import { ExpressAdapter } from '@nestjs/platform-express';
import type { Express } from 'express';

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
        // How often Node looks for requests that overran their bounds (boundRequestArrival); its default, 30 s,
        // would let a 10 s bound on a head run to 40 s.
        connectionsCheckingInterval: 1_000,
      },
      app,
    );
  }
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
