/** A network error in one line: its message and its cause's code (ECONNRESET, UND_ERR_SOCKET...). Internal: not exported by index. */
export function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = (error as { cause?: unknown }).cause;
  return cause instanceof Error ? `${error.message} (${(cause as { code?: string }).code ?? cause.message})` : error.message;
}
