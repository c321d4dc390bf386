import { ApiProperty } from '@nestjs/swagger';
import { TEXT_RULE } from '../../http/body-rules';
import { IsString, Length } from 'class-validator';

export class CancelOrderRequest {
  @ApiProperty({ minLength: 1, maxLength: 200, example: 'customer changed their mind', description: `Free text; ${TEXT_RULE}.` })
  @IsString()
  @Length(1, 200)
  reason: string;
}
