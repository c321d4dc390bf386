import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { ApiClient } from '@app/api-clients';
import type { AuthenticatedRequest } from './api-key.guard';

/** The client the ApiKeyGuard authenticated. */
export const CurrentClient = createParamDecorator(
  (_: unknown, context: ExecutionContext): ApiClient => context.switchToHttp().getRequest<AuthenticatedRequest>().client,
);
