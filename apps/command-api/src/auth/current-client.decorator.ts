import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { AuthenticatedClient } from './api-client-cache';
import type { AuthenticatedRequest } from './api-key.guard';

/** The client the ApiKeyGuard authenticated. */
export const CurrentClient = createParamDecorator(
  (_: unknown, context: ExecutionContext): AuthenticatedClient => context.switchToHttp().getRequest<AuthenticatedRequest>().client,
);
