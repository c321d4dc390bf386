import { ArgumentMetadata, ValidationError, ValidationPipe } from '@nestjs/common';
import { problemException } from './problem-catalog';

/**
 * class-transformer drops these keys without a word (its prototype-pollution guard), so the whitelist
 * below never sees them: they are refused here, as any other unknown field is.
 */
const KEYS_DROPPED_BEFORE_VALIDATION = ['__proto__', 'constructor'];

function invalid(details: { field: string; message: string }[]) {
  return problemException('REQUEST.INVALID', details.map((d) => d.message).join('; '), { errors: details });
}

class StrictValidationPipe extends ValidationPipe {
  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    if (typeof value === 'object' && value !== null) {
      const dropped = KEYS_DROPPED_BEFORE_VALIDATION.filter((key) => Object.prototype.hasOwnProperty.call(value, key));
      if (dropped.length) throw invalid(dropped.map((field) => ({ field, message: `property ${field} should not exist` })));
    }
    return super.transform(value, metadata);
  }
}

/** Strict DTO validation: unknown fields and wrong types are rejected, never coerced or dropped. */
export const strictValidation = new StrictValidationPipe({
  whitelist: true,
  forbidNonWhitelisted: true,
  transform: true,
  transformOptions: { enableImplicitConversion: false },
  exceptionFactory: (errors: ValidationError[]) =>
    invalid(
      errors.flatMap((error) =>
        Object.values(error.constraints ?? { invalid: `${error.property} is invalid` }).map((message) => ({
          field: error.property,
          message,
        })),
      ),
    ),
});
