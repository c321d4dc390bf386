import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { z } from 'zod';
import { TEXT_RULE } from '../../http/body-rules';

const SKU = /^[A-Za-z0-9._-]{1,64}$/;
const SKU_RULE = 'sku must be 1-64 characters of A-Z, a-z, 0-9, ".", "_", "-"';
const QUANTITY_RULE = 'quantity must be an integer from 1 to 10000';
const CUSTOMER_REF_RULE = 'customerRef must be a string of 1-64 characters (or null)';

/** What the API accepts as the body of `POST /v1/orders` (validated by `strictBody`). */
export const createOrderRequest = z.strictObject({
  sku: z.string({ error: SKU_RULE }).regex(SKU, { error: SKU_RULE }),
  quantity: z
    .number({ error: QUANTITY_RULE })
    .int({ error: QUANTITY_RULE })
    .min(1, { error: QUANTITY_RULE })
    .max(10_000, { error: QUANTITY_RULE }),
  customerRef: z.string({ error: CUSTOMER_REF_RULE }).min(1, { error: CUSTOMER_REF_RULE }).max(64, { error: CUSTOMER_REF_RULE }).nullish(),
});

/** The body as the OpenAPI document shows it: the same rules as `createOrderRequest` (the OpenAPI suite compares them). */
export class CreateOrderRequest implements z.output<typeof createOrderRequest> {
  @ApiProperty({ pattern: SKU.source, example: 'SKU-1' })
  sku: string;

  @ApiProperty({ type: 'integer', minimum: 1, maximum: 10000, example: 2 })
  quantity: number;

  @ApiPropertyOptional({
    type: 'string',
    nullable: true,
    minLength: 1,
    maxLength: 64,
    description: `Your own reference. Unique per tenant forever: a second order with it is 409, receipt or not. ${TEXT_RULE[0].toUpperCase()}${TEXT_RULE.slice(1)}.`,
  })
  customerRef?: string | null;
}
