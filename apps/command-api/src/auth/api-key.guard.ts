import { CanActivate, ExecutionContext, Injectable, SetMetadata } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { Reflector } from '@nestjs/core';
import type { ServerResponse } from 'node:http';
import type { Request } from 'express';
import proxyaddr from 'proxy-addr';
import { bearerKey } from '@app/api-clients';
import { Operation } from '@app/contracts';
import { logOnCompletion } from '@app/platform';
import { CommandApiConfig } from '../config';
import { problemException } from '../http/problem-catalog';
import { ApiClientCache, AuthenticatedClient } from './api-client-cache';
import { RateLimits } from './rate-limits';

const OPERATION = Symbol('operation');

/** Declares the operation a route performs; the guard refuses clients not allowed to perform it. */
export const RequiresOperation = (operation: Operation) => SetMetadata(OPERATION, operation);

export type AuthenticatedRequest = Request & { client: AuthenticatedClient };

/**
 * Authenticates `Authorization: Bearer <key>` and authorises the route's operation before anything
 * else reads the request. The tenant comes from the credential only. A database error here is a 503
 * (never a 401): an outage must not look like a bad key.
 */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  /** Which hops' `X-Forwarded-For` to believe (TRUSTED_PROXIES): the source address the budgets count. */
  private readonly trusted: ReturnType<typeof proxyaddr.compile>;

  constructor(
    private readonly clients: ApiClientCache,
    private readonly limits: RateLimits,
    private readonly reflector: Reflector,
    config: ConfigService<CommandApiConfig, true>,
  ) {
    this.trusted = proxyaddr.compile(config.get('TRUSTED_PROXIES', { infer: true }));
  }

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const request = context.switchToHttp().getRequest<AuthenticatedRequest>();
    const response = context.switchToHttp().getResponse<ServerResponse>();
    const operation = this.reflector.get<Operation | undefined>(OPERATION, context.getHandler());
    // Before authentication, so that refused requests are logged with what they tried.
    if (operation) logOnCompletion(response, { operation });
    const address = request.socket.remoteAddress ? proxyaddr(request, this.trusted) : 'unknown';
    const key = presentedKey(request);
    const beforeLookup = () => this.limits.beforeLookup(address);
    const client = key ? await this.clients.find(key, beforeLookup) : (await beforeLookup(), null);
    if (!client) {
      await this.limits.failedAuthentication(address);
      throw problemException('AUTH.UNAUTHENTICATED', 'Send a valid, unrevoked API key as Authorization: Bearer <key>.');
    }
    request.client = client;
    logOnCompletion(response, { tenant: client.tenantId, clientId: client.id });
    await this.limits.admit(client.id, response);
    if (operation) authorise(client, operation);
    return true;
  }
}

/**
 * The bearer key of the request's one `Authorization` field. Authorization is a singleton field (RFC 9110):
 * of two, Node keeps the first and drops the rest, while a proxy in front may have judged another one, so a
 * request with more than one has no credential at all.
 */
function presentedKey(request: Request): string | undefined {
  const raw = request.rawHeaders;
  let fields = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i].length === 13 && raw[i].toLowerCase() === 'authorization') fields++;
  return fields === 1 ? bearerKey(request.headers.authorization) : undefined;
}

export function authorise(client: AuthenticatedClient, operation: Operation): void {
  if (!client.allowedOperations.includes(operation)) {
    throw problemException('AUTH.FORBIDDEN', `This client may not perform ${operation}.`);
  }
}
