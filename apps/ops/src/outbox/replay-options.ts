import { canonicalUuid } from '@app/contracts';
import { CliError, ExitCode } from '../cli-error';
import { parseInstant } from '../options';

/** A range end: an outbox sequence number, or an instant compared with `published_at`. */
export type ReplayBound = { sequence: string } | { time: Date };

const SEQUENCE = /^\d{1,18}$/;

export function parseBound(flag: string, value: string): ReplayBound {
  if (SEQUENCE.test(value)) return { sequence: BigInt(value).toString() };
  const time = parseInstant(value);
  if (!time) {
    throw new CliError(
      `${flag} must be an outbox sequence number or an ISO 8601 time with its offset (2025-01-31T14:00:00Z), not "${value}"`,
      ExitCode.usage,
    );
  }
  return { time };
}

/** Refuses a range that ends before it starts (only comparable when both ends are of one kind). */
export function checkRange(from: ReplayBound, to: ReplayBound | undefined): void {
  if (!to) return;
  const backwards =
    'sequence' in from && 'sequence' in to
      ? BigInt(to.sequence) < BigInt(from.sequence)
      : 'time' in from && 'time' in to && to.time.getTime() < from.time.getTime();
  if (backwards) throw new CliError(`--to (${describeBound(to)}) is before --from (${describeBound(from)})`, ExitCode.usage);
}

export function describeBound(bound: ReplayBound): string {
  return 'sequence' in bound ? `sequence ${bound.sequence}` : bound.time.toISOString();
}

export function parseRate(value: string): number {
  const rate = Number(value);
  if (!/^\d+(\.\d+)?$/.test(value.trim()) || !(rate > 0) || rate > 1_000_000) {
    throw new CliError(`--rate must be a number of messages per second above 0 (at most 1000000), not "${value}"`, ExitCode.usage);
  }
  return rate;
}

const TOPIC = /^[A-Za-z0-9._-]{1,249}$/;

export function parseTopic(value: string): string {
  if (!TOPIC.test(value)) throw new CliError('--topic must be a Kafka topic name: 1-249 of A-Z a-z 0-9 . _ -', ExitCode.usage);
  return value;
}

export function parseText(flag: string, value: string): string {
  if (!value.trim() || value.length > 255) throw new CliError(`${flag} must be 1-255 characters`, ExitCode.usage);
  return value;
}

export function parseReplayId(value: string): string {
  const id = canonicalUuid(value);
  if (!id) throw new CliError(`--resume takes the replay id (a UUID) a replay printed, not "${value}"`, ExitCode.usage);
  return id;
}

/**
 * An aggregate id as its events are keyed: a UUID (an order id) in its canonical lower-case form, in
 * whatever case the operator typed it; any other key exactly as given.
 */
export function parseAggregate(value: string): string {
  return canonicalUuid(value) ?? parseText('--aggregate', value);
}

/** Rows per batch: about one second's worth under --rate, so an interrupt never waits long for the batch in flight. */
export function batchSize(rate: number | undefined, max = 500): number {
  return rate === undefined ? max : Math.max(1, Math.min(max, Math.floor(rate)));
}
