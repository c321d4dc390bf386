/**
 * What a finished test file left running that keeps its jest worker's process alive: timers it
 * armed and never cleared (still referenced), and handles (sockets, servers, child processes) that
 * were not open before it started. Jest only says "a worker process has failed to exit gracefully"
 * at the very end of a run, naming nothing; this names the file and where each timer was armed.
 */
export class Leftovers {
  private readonly timers = new Map<NodeJS.Timeout, { kind: string; ms: number | undefined; armed: Error }>();
  private readonly handlesBefore: Set<unknown>;
  /** How many resources of each kind kept the process alive when the file started (Node's count). */
  private readonly resourcesBefore: Map<string, number>;

  /**
   * Watches the timers armed through `global` (a test file's global: its code and the libraries it
   * loads arm theirs there) from now on, and notes the process's handles as they are.
   */
  constructor(global: Record<string, any>) {
    this.handlesBefore = new Set(activeHandles());
    this.resourcesBefore = activeResources();
    const timers = this.timers;
    for (const kind of ['setTimeout', 'setInterval'] as const) {
      const arm = global[kind] as (...given: unknown[]) => NodeJS.Timeout;
      const watched = function (this: unknown, callback: unknown, ms?: number, ...args: unknown[]) {
        const run =
          typeof callback === 'function' && kind === 'setTimeout'
            ? function (this: unknown, ...given: unknown[]) {
                timers.delete(timer);
                return (callback as (...a: unknown[]) => unknown).apply(this, given);
              }
            : callback;
        const timer = arm.call(this, run, ms, ...args);
        // The stack is captured now and formatted only if the timer is ever reported.
        timers.set(timer, { kind, ms, armed: new Error() });
        return timer;
      };
      global[kind] = Object.assign(watched, arm);
    }
    for (const kind of ['clearTimeout', 'clearInterval'] as const) {
      const clear = global[kind] as (timer?: NodeJS.Timeout) => void;
      global[kind] = function (this: unknown, timer?: NodeJS.Timeout) {
        if (timer) timers.delete(timer);
        return clear.call(this, timer);
      };
    }
  }

  /** One line per timer or handle still keeping the process alive; empty when the file left nothing. */
  list(): string[] {
    const found: string[] = [];
    for (const [timer, { kind, ms, armed }] of this.timers) {
      // Fired or cleared (also by its number, which the map cannot tell), or not keeping the process alive.
      if ((timer as unknown as { _destroyed: boolean })._destroyed || !timer.hasRef()) continue;
      found.push(`${kind}(…, ${ms ?? 0} ms), armed ${where(armed)}`);
    }
    const watchedTimers = found.length;
    for (const handle of activeHandles()) {
      if (!this.handlesBefore.has(handle) && !isStdio(handle)) found.push(describeHandle(handle));
    }
    // What the two lists above cannot see: timers armed through node:timers or timers/promises (a library's,
    // not through the file's global), immediates, and any other kind Node counts but lists no handle for.
    for (const [kind, count] of activeResources()) {
      const more = count - (this.resourcesBefore.get(kind) ?? 0) - (kind === 'Timeout' ? watchedTimers : 0);
      if (more > 0 && !LISTED_AS_HANDLES.has(kind)) found.push(`${more} more ${kind} (armed outside the file's global: no stack)`);
    }
    return found;
  }
}

/** Kinds of Node's resource count that `activeHandles()` lists one by one (sockets, servers, child processes, terminals). */
const LISTED_AS_HANDLES = new Set(['TCPSocketWrap', 'TCPServerWrap', 'PipeWrap', 'PipeServerWrap', 'ProcessWrap', 'TTYWrap']);

/** How many resources of each kind keep the process alive now (`process.getActiveResourcesInfo()`). */
function activeResources(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const kind of process.getActiveResourcesInfo()) counts.set(kind, (counts.get(kind) ?? 0) + 1);
  return counts;
}

function activeHandles(): unknown[] {
  return (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles();
}

/** Where the timer was armed: the first frames of its stack past this file's own. */
function where(armed: Error): string {
  const frames = (armed.stack ?? '')
    .split('\n')
    .slice(1)
    .map((line) => line.trim().replace(/^at /, ''))
    .filter((frame) => !frame.includes('leftovers.ts'));
  return frames.slice(0, 4).join(' < ') || 'at an unknown place';
}

/** The process's own stdin, stdout and stderr, which Node opens when first used, not when the process starts. */
function isStdio(handle: any): boolean {
  const fd = handle?._handle?.fd;
  return fd === 0 || fd === 1 || fd === 2;
}

function describeHandle(handle: any): string {
  const kind: string = handle?.constructor?.name ?? typeof handle;
  if (kind === 'Socket') {
    const over: string | undefined = handle._handle?.constructor?.name;
    if (over === 'Pipe') return "a pipe (a child process's output or input, or a Unix socket)";
    if (over === 'TCP' && handle.remotePort) return `a TCP socket to ${handle.remoteAddress}:${handle.remotePort}`;
    if (over === 'TCP') return `a TCP socket from local port ${handle.localPort ?? '?'} whose peer is gone`;
    return 'a socket being closed';
  }
  if (kind === 'Server') return `a server listening on ${JSON.stringify(handle.address?.())}`;
  if (kind === 'ChildProcess') return `child process ${handle.pid} (${(handle.spawnargs ?? []).join(' ').slice(0, 120)})`;
  return `a ${kind}`;
}
