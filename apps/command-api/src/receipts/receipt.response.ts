import { ApiProperty } from '@nestjs/swagger';

class EffectReference {
  @ApiProperty({ example: 'order' }) type: string;
  @ApiProperty() id: string;
}

export class ReceiptResponse {
  @ApiProperty({ example: 'orders.create' }) operation: string;
  @ApiProperty() key: string;
  @ApiProperty({
    enum: ['completed', 'expired'],
    description:
      'expired: past expiresAt and not yet swept; the key runs anew, or, while tombstoneUntil is ahead, is refused ' +
      '(422 /problems/idempotency-key-expired).',
  })
  status: 'completed' | 'expired';
  @ApiProperty({ description: 'The HTTP status the stored response carries.' }) responseStatus: number;
  @ApiProperty({ type: EffectReference, nullable: true, description: 'What the request changed; null for stored rejections.' })
  effect: EffectReference | null;
  @ApiProperty({ description: "SERVICE_REGION of the deployment that stored it: another region's store has its own scopes." })
  region: string;
  @ApiProperty() fingerprintVersion: number;
  @ApiProperty({ format: 'date-time' }) createdAt: string;
  @ApiProperty({ format: 'date-time' }) completedAt: string;
  @ApiProperty({ format: 'date-time' }) expiresAt: string;
  @ApiProperty({
    type: String,
    format: 'date-time',
    nullable: true,
    description:
      'null: no tombstone. Otherwise the operation keeps a tombstone (IDEMPOTENCY_TOMBSTONE_SECONDS_<OPERATION>): from ' +
      'expiresAt until this time a retry with the key is refused with 422 /problems/idempotency-key-expired, whatever its ' +
      'fields; after it the key runs anew.',
  })
  tombstoneUntil: string | null;
}
