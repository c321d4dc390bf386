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
