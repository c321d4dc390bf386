import { PipeTransform } from '@nestjs/common';
import { z } from 'zod';
import { problemException } from './problem-catalog';

/** One refused field of a body: its name and why, in the words of the body's schema. */
interface FieldProblem {
  field: string;
  message: string;
}

/**
 * The issues of a failed parse, one per field (each unknown field on its own). A value can break several
 * of its field's rules at once (2^53 is neither a safe integer nor at most 10,000): the first rule broken
 * speaks for the field.
 */
function fieldProblems(error: z.ZodError): FieldProblem[] {
  const byField = new Map<string, FieldProblem>();
  for (const issue of error.issues) {
    const problems =
      issue.code === 'unrecognized_keys'
        ? issue.keys.map((field) => ({ field, message: `property ${field} should not exist` }))
        : [{ field: issue.path.map(String).join('.'), message: issue.message }];
    for (const problem of problems) if (!byField.has(problem.field)) byField.set(problem.field, problem);
  }
  return [...byField.values()];
}

/**
 * Validates a JSON body (already parsed by JsonBodyGuard) against its zod schema: unknown fields and
 * wrong types are refused with a 400 naming every offending field, never coerced or dropped; the
 * handler gets what the schema parsed. Schemas are strict objects (`z.strictObject`), so a field named
 * `__proto__` or `constructor` is refused like any other unknown one.
 */
class StrictBody<T extends z.ZodType> implements PipeTransform<unknown, z.output<T>> {
  constructor(private readonly schema: T) {}

  transform(value: unknown): z.output<T> {
    const parsed = this.schema.safeParse(value);
    if (parsed.success) return parsed.data;
    const details = fieldProblems(parsed.error);
    throw problemException('REQUEST.INVALID', details.map((d) => d.message).join('; '), { errors: details });
  }
}

/** The pipe for `@Body(strictBody(schema))`. */
export function strictBody<T extends z.ZodType>(schema: T): PipeTransform<unknown, z.output<T>> {
  return new StrictBody(schema);
}
