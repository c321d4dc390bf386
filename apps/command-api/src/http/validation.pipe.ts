import { ValidationError, ValidationPipe } from '@nestjs/common';
import { problemException } from './problem-catalog';

/** Strict DTO validation: unknown fields and wrong types are rejected, never coerced or dropped. */
export const strictValidation = new ValidationPipe({
  whitelist: true,
  forbidNonWhitelisted: true,
  transform: true,
  transformOptions: { enableImplicitConversion: false },
  exceptionFactory: (errors: ValidationError[]) => {
    const details = errors.flatMap((error) =>
      Object.values(error.constraints ?? { invalid: `${error.property} is invalid` }).map((message) => ({
        field: error.property,
        message,
      })),
    );
    return problemException('REQUEST.INVALID', details.map((d) => d.message).join('; '), { errors: details });
  },
});
