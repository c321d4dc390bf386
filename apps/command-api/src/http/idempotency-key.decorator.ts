import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import { ApiHeader } from '@nestjs/swagger';
import type { Request } from 'express';
import { isValidIdempotencyKey } from '@app/idempotency';
import { problemException } from './problem-catalog';

/** The validated `Idempotency-Key` header; a missing or malformed key is a 400 before any lookup. */
export const IdempotencyKey = createParamDecorator((_: unknown, context: ExecutionContext): string => {
  const value = context.switchToHttp().getRequest<Request>().headers['idempotency-key'];
  if (!isValidIdempotencyKey(value)) {
    throw problemException(
      'REQUEST.INVALID',
      'The Idempotency-Key header is required: 1-255 visible ASCII characters (0x21-0x7E), sent once.',
    );
  }
  return value;
});

export const ApiIdempotencyKeyHeader = () =>
  ApiHeader({
    name: 'Idempotency-Key',
    required: true,
    description:
      'One logical action within (your tenant, this operation, this key) and the retention window. ' +
      '1-255 characters in 0x21-0x7E. A retry with the same key and the same declared fields replays the ' +
      'first response; the same key with different fields is 422.',
  });
