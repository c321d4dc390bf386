import { Global, Module } from '@nestjs/common';
import { ApiClientCache } from './api-client-cache';

/** One API client cache for the process, used by every ApiKeyGuard. */
@Global()
@Module({ providers: [ApiClientCache], exports: [ApiClientCache] })
export class AuthModule {}
