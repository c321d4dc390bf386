import type { ServerResponse } from 'node:http';
import { isIPv4, isIPv6 } from 'node:net';
import { Injectable } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { CommandApiConfig } from '../config';
import { problemException } from '../http/problem-catalog';

/**
 * Request budgets of the command API, per window of RATE_LIMIT_WINDOW_SECONDS, counted in this
 * process (rate-limiter-flexible, in memory): with N API instances behind a balancer a client gets up
 * to N times its budget. Over budget is `429` with `Retry-After`; every `/v1` answer to an
 * authenticated client carries the IETF `RateLimit-Policy` and `RateLimit` headers
 * (draft-ietf-httpapi-ratelimit-headers: `"client";q=<requests>;w=<seconds>` and
 * `"client";r=<remaining>;t=<seconds to the window's end>`).
 *
 * - per client: RATE_LIMIT_CLIENT_REQUESTS, counted after authentication;
 * - per source address, for requests that fail authentication: RATE_LIMIT_UNAUTHENTICATED_REQUESTS
 *   (an IPv6 address counted by its /64: `sourceOf`).
 *   Once an address has used that up, its requests are refused before the key is looked up in the
 *   database, unless the key is one the API already holds in memory: made-up keys cannot buy lookups.
 * 0 turns a budget off.
 */
@Injectable()
export class RateLimits {
  private readonly window: number;
  private readonly perClient?: RateLimiterMemory;
  private readonly unauthenticated?: RateLimiterMemory;
  private readonly policy: string;

  constructor(config: ConfigService<CommandApiConfig, true>) {
    this.window = config.get('RATE_LIMIT_WINDOW_SECONDS', { infer: true });
    const clientRequests = config.get('RATE_LIMIT_CLIENT_REQUESTS', { infer: true });
    const unauthenticatedRequests = config.get('RATE_LIMIT_UNAUTHENTICATED_REQUESTS', { infer: true });
    if (clientRequests > 0) this.perClient = new RateLimiterMemory({ keyPrefix: 'client', points: clientRequests, duration: this.window });
    if (unauthenticatedRequests > 0) {
      this.unauthenticated = new RateLimiterMemory({
        keyPrefix: 'unauthenticated',
        points: unauthenticatedRequests,
        duration: this.window,
      });
    }
    this.policy = `"client";q=${clientRequests};w=${this.window}`;
  }

  /** Refuses (429) a request whose credential must be looked up, from an address that has used up its failed authentications. */
  async beforeLookup(address: string): Promise<void> {
    if (!this.unauthenticated) return;
    const used = await this.unauthenticated.get(sourceOf(address));
    if (used && used.consumedPoints >= this.unauthenticated.points) {
      throw this.refusal(used, 'Too many requests with missing or invalid credentials from this address.');
    }
  }

  /** Counts a failed authentication against its source address. */
  async failedAuthentication(address: string): Promise<void> {
    await this.unauthenticated?.consume(sourceOf(address)).catch(() => undefined);
  }

  /** Counts an authenticated request against its client: sets the RateLimit headers, or throws 429. */
  async admit(clientId: string, response: ServerResponse): Promise<void> {
    if (!this.perClient) return;
    let state: RateLimiterRes;
    try {
      state = await this.perClient.consume(clientId);
    } catch (refused) {
      if (!(refused instanceof RateLimiterRes)) throw refused;
      throw this.refusal(refused, `This client may send ${this.perClient.points} requests per ${this.window} s.`, true);
    }
    response.setHeader('RateLimit-Policy', this.policy);
    response.setHeader('RateLimit', `"client";r=${state.remainingPoints};t=${seconds(state)}`);
  }

  private refusal(state: RateLimiterRes, detail: string, client = false) {
    const retryAfter = String(seconds(state));
    const headers: Record<string, string> = { 'Retry-After': retryAfter };
    if (client) {
      headers['RateLimit-Policy'] = this.policy;
      headers.RateLimit = `"client";r=0;t=${retryAfter}`;
    }
    return problemException('REQUEST.RATE_LIMITED', `${detail} Retry after ${retryAfter} s.`, {}, headers);
  }
}

const seconds = (state: RateLimiterRes) => Math.max(1, Math.ceil(state.msBeforeNext / 1000));

/**
 * Who a source address stands for: an IPv4 address itself (also when the socket reports it IPv4-mapped,
 * `::ffff:192.0.2.7`, as a dual-stack listener does), an IPv6 address its /64, the block one host or
 * subscriber is given: one host can use any address in it, so counting addresses one by one would give
 * it 2^64 budgets.
 */
function sourceOf(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped && isIPv4(mapped[1])) return mapped[1];
  const bare = address.split('%')[0]; // a link-local address's zone
  if (!isIPv6(bare)) return address;
  // An embedded IPv4 address is the last 32 bits, never in the first 64: read as two groups.
  const groups = (part = '') => (part ? part.split(':').flatMap((group) => (group.includes('.') ? ['0', '0'] : [group])) : []);
  const [head, tail] = bare.split('::').map(groups);
  const all = tail ? [...head, ...Array<string>(8 - head.length - tail.length).fill('0'), ...tail] : head;
  const block = all.slice(0, 4).map((group) => parseInt(group, 16).toString(16));
  return `${block.join(':')}::/64`;
}
