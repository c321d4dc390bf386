import { CliError, ExitCode } from './cli-error';

/** A whole number in [min, max] written as plain digits (no "1e3", "7d" or "1.5"), else bad usage naming the flag. */
export function integerOption(flag: string, value: string, min: number, max: number, unit?: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < min || n > max) {
    throw new CliError(`${flag} must be an integer ${min}-${max}${unit ? ` ${unit}` : ''}`, ExitCode.usage);
  }
  return n;
}

/** A date (midnight UTC) or a date-time that names its offset: an operator's local clock is never guessed. */
const ISO_TIME = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2}))?$/i;

/** An instant written as ISO 8601 with its offset (or a bare date, midnight UTC); undefined when it is not one. */
export function parseInstant(value: string): Date | undefined {
  if (!ISO_TIME.test(value)) return undefined;
  const time = new Date(value.length === 10 ? `${value}T00:00:00Z` : value);
  return Number.isNaN(time.getTime()) ? undefined : time;
}
