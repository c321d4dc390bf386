import { ApiProperty } from '@nestjs/swagger';

class EffectReference {
  @ApiProperty({ example: 'order' }) type: string;
  @ApiProperty() id: string;
}

export class ReceiptResponse {
  @ApiProperty({ example: 'orders.create' }) operation: string;
  @ApiProperty() key: string;
  @ApiProperty({ enum: ['completed', 'expired'], description: 'expired: past expiresAt and not yet swept; the key runs anew.' })
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
}
