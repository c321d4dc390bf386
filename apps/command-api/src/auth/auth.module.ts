import { Global, Module } from '@nestjs/common';
import { ApiClientCache } from './api-client-cache';
import { RateLimits } from './rate-limits';

/** One API client cache and one set of rate limits for the process, used by every ApiKeyGuard. */
@Global()
@Module({ providers: [ApiClientCache, RateLimits], exports: [ApiClientCache, RateLimits] })
export class AuthModule {}
