import { ParseUUIDPipe } from '@nestjs/common';
import { problemException } from './problem-catalog';

/** Order ids are UUIDs; anything else is a 400 that stores nothing. */
export const orderIdPipe = new ParseUUIDPipe({
  exceptionFactory: () => problemException('REQUEST.INVALID', 'The order id must be a UUID.'),
});
