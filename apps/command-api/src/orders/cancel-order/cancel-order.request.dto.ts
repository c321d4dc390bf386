import { ApiProperty } from '@nestjs/swagger';
import { z } from 'zod';
import { TEXT_RULE } from '../../http/body-rules';

const REASON_RULE = 'reason must be a string of 1-200 characters';

/** What the API accepts as the body of `POST /v1/orders/{id}/cancel` (validated by `strictBody`). */
export const cancelOrderRequest = z.strictObject({
  reason: z.string({ error: REASON_RULE }).min(1, { error: REASON_RULE }).max(200, { error: REASON_RULE }),
});

/** The body as the OpenAPI document shows it: the same rules as `cancelOrderRequest` (the OpenAPI suite compares them). */
export class CancelOrderRequest implements z.output<typeof cancelOrderRequest> {
  @ApiProperty({ minLength: 1, maxLength: 200, example: 'customer changed their mind', description: `Free text; ${TEXT_RULE}.` })
  reason: string;
}
