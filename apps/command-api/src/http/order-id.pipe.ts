import { PipeTransform } from '@nestjs/common';
import { ApiParam } from '@nestjs/swagger';
import { canonicalUuid, UUID_PATTERN } from '@app/contracts';
import { problemException } from './problem-catalog';

/**
 * Order ids are UUIDs in any letter case (what Nest's ParseUUIDPipe accepted); they go on in their
 * canonical lower-case form, so every spelling names one order, one receipt fingerprint, one Kafka
 * key. Anything else is a 400 that stores nothing.
 */
export const orderIdPipe: PipeTransform<unknown, string> = {
  transform(value) {
    const id = canonicalUuid(value);
    if (!id) throw problemException('REQUEST.INVALID', 'The order id must be a UUID.');
    return id;
  },
};

/** The `{id}` path parameter as OpenAPI shows it. */
export const ApiOrderIdParam = () =>
  ApiParam({
    name: 'id',
    schema: { type: 'string', format: 'uuid', pattern: UUID_PATTERN.source },
    description:
      'The order id: a UUID in 8-4-4-4-12 hex form, in any letter case. Every spelling names the same order and is the ' +
      'same request for the Idempotency-Key fingerprint; responses, receipts and events carry it in lower case.',
  });
