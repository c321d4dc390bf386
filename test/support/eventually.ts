/**
 * The suites' one way to wait for something: probes `probe` every `intervalMs` until `done` holds
 * for what it returned, and returns that; after `timeoutMs` it fails, saying what it waited for and
 * what it saw last. A probe that throws counts as "not yet" (a broker still electing a leader, a
 * server restarting) until the deadline, when its last error is reported. Never a fixed sleep: a wait
 * ends as soon as the thing happened, and a bug that is only slower than a sleep still fails here.
 */
export async function eventually<T>(
  probe: () => T | Promise<T>,
  done: (value: T) => boolean,
  { timeoutMs = 30_000, intervalMs = 100, what = 'the condition' }: { timeoutMs?: number; intervalMs?: number; what?: string } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let seen: string;
    try {
      const value = await probe();
      if (done(value)) return value;
      seen = describe(value);
    } catch (error) {
      seen = `an error: ${(error as Error)?.message ?? String(error)}`;
    }
    if (Date.now() > deadline) throw new Error(`${what} did not hold within ${timeoutMs} ms; last seen: ${seen}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

function describe(value: unknown): string {
  try {
    const text = JSON.stringify(value) ?? String(value);
    return text.length > 4_000 ? `${text.slice(0, 4_000)}…` : text;
  } catch {
    return String(value);
  }
}
