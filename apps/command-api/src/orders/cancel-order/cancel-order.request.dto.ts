import { ApiProperty } from '@nestjs/swagger';
import { IsString, Length } from 'class-validator';

export class CancelOrderRequest {
  @ApiProperty({ minLength: 1, maxLength: 200, example: 'customer changed their mind' })
  @IsString()
  @Length(1, 200)
  reason: string;
}
