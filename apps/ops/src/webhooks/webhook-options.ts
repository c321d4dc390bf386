import { canonicalUuid } from '@app/contracts';
import { CliError, ExitCode } from '../cli-error';

export const DELIVERY_STATES = ['pending', 'delivered', 'dead'] as const;
export type DeliveryState = (typeof DELIVERY_STATES)[number];

/** The tenant rule of clients:create. */
const TENANT = /^[A-Za-z0-9._-]{1,64}$/;
const REASON_MAX = 500;

export function parseState(value: string): DeliveryState {
  const state = DELIVERY_STATES.find((known) => known === value);
  if (!state) throw new CliError(`--state must be one of ${DELIVERY_STATES.join(', ')}, not "${value}"`, ExitCode.usage);
  return state;
}

/** An order id in any letter case, as the deliveries store it (lower case). */
export function parseOrder(value: string): string {
  const order = canonicalUuid(value);
  if (!order) throw new CliError(`--order must be an order id (UUID), not "${value}"`, ExitCode.usage);
  return order;
}

export function parseTenant(value: string): string {
  if (!TENANT.test(value)) throw new CliError('--tenant must be 1-64 of A-Z, a-z, 0-9, ".", "_", "-"', ExitCode.usage);
  return value;
}

/** Why an operator gave up on a delivery: kept as its last_error, so it must say something. */
export function parseReason(value: string): string {
  const reason = value.trim();
  if (!reason || reason.length > REASON_MAX) throw new CliError(`--reason must be 1-${REASON_MAX} characters`, ExitCode.usage);
  return reason;
}

/** Message-ids (webhook-ids) in their canonical spelling, each once; anything else is bad usage naming it. */
export function parseMessageIds(args: string[]): string[] {
  const malformed = args.filter((id) => !canonicalUuid(id));
  if (malformed.length) throw new CliError(`not a message-id (UUID): ${malformed.join(', ')}`, ExitCode.usage);
  return [...new Set(args.map((id) => canonicalUuid(id)!))];
}

export interface RetryOptions {
  allDead?: boolean;
  tenant?: string;
  redeliver?: boolean;
  dryRun?: boolean;
  json?: boolean;
}

/** What webhooks:retry works on: the deliveries named (all of them or none), or every dead one (of a tenant). */
export type RetrySelection = { messageIds: string[]; redeliver: boolean } | { allDead: true; tenant?: string };

export function retrySelection(args: string[], options: RetryOptions): RetrySelection {
  if (args.length && options.allDead) throw new CliError('name message-ids or give --all-dead, not both', ExitCode.usage);
  if (!args.length && !options.allDead) {
    throw new CliError('name the message-ids to retry (see webhooks:list), or give --all-dead', ExitCode.usage);
  }
  if (options.allDead) {
    if (options.redeliver) throw new CliError('--redeliver applies to named message-ids only', ExitCode.usage);
    return { allDead: true, tenant: options.tenant };
  }
  if (options.tenant !== undefined)
    throw new CliError('--tenant narrows --all-dead; named message-ids are taken as they are', ExitCode.usage);
  return { messageIds: parseMessageIds(args), redeliver: options.redeliver ?? false };
}

export interface DeadLetterOptions {
  reason?: string;
  json?: boolean;
}

export function deadLetterSelection(args: string[], options: DeadLetterOptions): { messageIds: string[]; reason: string } {
  if (!args.length) throw new CliError('name the message-ids of the deliveries to give up (see webhooks:list)', ExitCode.usage);
  const messageIds = parseMessageIds(args);
  if (options.reason === undefined) {
    throw new CliError("--reason <text> is required: it is kept as the delivery's last error", ExitCode.usage);
  }
  return { messageIds, reason: options.reason };
}
