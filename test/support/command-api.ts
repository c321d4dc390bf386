import { RunningApp, startApp } from './apps';
import { OrdersDb } from './orders-db';
import { http, HttpResult } from './http';

/** A client of the command API holding one API key; every call opens its own connection. */
export class ApiClientSession {
  constructor(
    readonly baseUrl: string,
    readonly apiKey: string,
  ) {}

  createOrder(key: string | undefined, body: unknown, headers: Record<string, string> = {}): Promise<HttpResult> {
    return http(`${this.baseUrl}/v1/orders`, {
      method: 'POST',
      headers: { ...this.auth(), ...(key === undefined ? {} : { 'Idempotency-Key': key }), ...headers },
      body,
    });
  }

  cancelOrder(orderId: string, key: string, body: unknown, headers: Record<string, string> = {}): Promise<HttpResult> {
    return http(`${this.baseUrl}/v1/orders/${orderId}/cancel`, {
      method: 'POST',
      headers: { ...this.auth(), 'Idempotency-Key': key, ...headers },
      body,
    });
  }

  get(path: string): Promise<HttpResult> {
    return http(`${this.baseUrl}${path}`, { headers: this.auth() });
  }

  private auth() {
    return { Authorization: `Bearer ${this.apiKey}` };
  }
}

/**
 * One command-api process and one OrdersDb for a describe block: started in beforeAll, stopped in
 * afterAll. `api` is available inside the tests.
 */
export function commandApiFixture(env: Record<string, string> = {}): { readonly db: OrdersDb; readonly api: RunningApp } {
  const db = new OrdersDb();
  let running: RunningApp | undefined;
  beforeAll(async () => {
    running = await startApp('command-api', env);
  });
  afterAll(async () => {
    await running?.stop();
    await db.close();
  });
  return {
    db,
    get api() {
      if (!running) throw new Error('the command-api of this suite has not started');
      return running;
    },
  };
}
