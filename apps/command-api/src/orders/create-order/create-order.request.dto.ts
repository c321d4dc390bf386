import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsInt, IsOptional, IsString, Length, Matches, Max, Min } from 'class-validator';
import { TEXT_RULE } from '../../http/body-rules';

export class CreateOrderRequest {
  @ApiProperty({ pattern: '^[A-Za-z0-9._-]{1,64}$', example: 'SKU-1' })
  @IsString()
  @Matches(/^[A-Za-z0-9._-]{1,64}$/, { message: 'sku must be 1-64 characters of A-Z, a-z, 0-9, ".", "_", "-"' })
  sku: string;

  @ApiProperty({ type: 'integer', minimum: 1, maximum: 10000, example: 2 })
  @IsInt()
  @Min(1)
  @Max(10000)
  quantity: number;

  @ApiPropertyOptional({
    minLength: 1,
    maxLength: 64,
    description: `Your own reference. Unique per tenant forever: a second order with it is 409, receipt or not. ${TEXT_RULE[0].toUpperCase()}${TEXT_RULE.slice(1)}.`,
  })
  @IsOptional()
  @IsString()
  @Length(1, 64)
  customerRef?: string;
}
