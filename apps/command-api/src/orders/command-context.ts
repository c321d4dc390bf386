import type { Request } from 'express';
import { childTraceparent } from '@app/platform';

/** What a command carries besides its fields: trace context for its events, and the test-only fault switch. */
export interface CommandContext {
  traceparent: string;
  /** Throw after the effect and its event are written, before the receipt: proves the rollback. */
  failAfterEffect: boolean;
}

export const FAULT_HEADER = 'x-fault-injection';

export function commandContext(request: Request, faultInjectionEnabled: boolean): CommandContext {
  return {
    traceparent: childTraceparent(request.headers.traceparent as string | undefined),
    failAfterEffect: faultInjectionEnabled && request.headers[FAULT_HEADER] === 'after-effect-before-receipt',
  };
}
