import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Counts the instructions a process executes, with valgrind's callgrind: a count, not a time, so it
 * does not move with whatever else the machine is doing (this VM's speed varies 2-3x within hours). The
 * process runs under `launcher` with instrumentation off (valgrind's core alone, a few times slower), so
 * that it starts and warms up in seconds; `count` turns it on around the work. Linux with valgrind only.
 */
export class Callgrind {
  private readonly dir = mkdtempSync(join(tmpdir(), 'bench-callgrind-'));

  /** valgrind and callgrind_control answer: the benchmark can run here. */
  static available(): boolean {
    try {
      execFileSync('valgrind', ['--version'], { stdio: 'ignore' });
      execFileSync('callgrind_control', ['--version'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  }

  /** The command line to put in front of node's. */
  get launcher(): string[] {
    return [
      'valgrind',
      '--tool=callgrind',
      '--instr-atstart=no',
      `--vgdb-prefix=${join(this.dir, 'vgdb')}`,
      `--callgrind-out-file=${join(this.dir, 'callgrind.out.%p')}`,
    ];
  }

  /**
   * Instructions `pid` executed while `work` ran, on all its threads. `env` is the process's USER and HOST: vgdb names the
   * channel to a process after them (an app's HOST is its listening address, not the machine's name).
   */
  async count(pid: number, env: { USER?: string; HOST?: string }, work: () => Promise<void>): Promise<number> {
    const control = (...args: string[]) => this.control(pid, env, args);
    control('--instr=on');
    control('--zero');
    await work();
    const counters = control('-e');
    control('--instr=off');
    const threads = [...counters.matchAll(/^\s*Th \d+\s+([\d,]+)/gm)].map(([, count]) => Number(count.replace(/,/g, '')));
    if (threads.length === 0) throw new Error(`callgrind_control reported no counts for process ${pid}:\n${counters}`);
    return threads.reduce((sum, count) => sum + count, 0);
  }

  close(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }

  private control(pid: number, env: { USER?: string; HOST?: string }, args: string[]): string {
    const environment: NodeJS.ProcessEnv = { ...process.env, USER: env.USER, HOST: env.HOST };
    for (const name of ['USER', 'HOST'] as const) if (environment[name] === undefined) delete environment[name];
    return execFileSync('callgrind_control', [`--vgdb-prefix=${join(this.dir, 'vgdb')}`, ...args, String(pid)], {
      env: environment,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 60_000,
    });
  }
}
