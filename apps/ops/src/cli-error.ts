/** Exit codes every ops command keeps: 0 done, 1 a check failed or the command refused, 2 bad usage. */
export const ExitCode = { ok: 0, failed: 1, usage: 2 } as const;

/** A failure the CLI reports as one line on stderr with its exit code, without a stack trace. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = ExitCode.failed,
  ) {
    super(message);
    this.name = 'CliError';
  }
}
