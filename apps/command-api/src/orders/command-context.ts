import type { Request } from 'express';
import { childTraceparent } from '@app/platform';

/** What a command carries besides its fields: trace context for its events, and the test-only fault switch. */
export interface CommandContext {
  traceparent: string;
  /** Fail after the effect, its events and the receipt are written, before COMMIT: proves the rollback (command-runner.ts). */
  failBeforeCommit: boolean;
}

export const FAULT_HEADER = 'x-fault-injection';

export function commandContext(request: Request, faultInjectionEnabled: boolean): CommandContext {
  return {
    traceparent: childTraceparent(request.headers.traceparent as string | undefined),
    failBeforeCommit: faultInjectionEnabled && request.headers[FAULT_HEADER] === 'before-commit',
  };
}
