import { execFile } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export type ShutdownMode = 'fast' | 'immediate';

/** The directory of PostgreSQL's server programs (initdb, pg_ctl), or why there is none. */
function serverBinaries(): { bin: string } | { missing: string } {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(join(root, v, 'bin', 'initdb')) && existsSync(join(root, v, 'bin', 'pg_ctl')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0) return { missing: `no PostgreSQL server programs (initdb, pg_ctl) under ${root}` };
  return { bin: join(root, versions[0], 'bin') };
}

/** PostgreSQL refuses to run as root: as root the server runs as the `postgres` user, otherwise as the current one. */
function runAs(): { user?: string; uid?: number; gid?: number } | { missing: string } {
  if (userInfo().uid !== 0) return {};
  try {
    const { uid, gid } = userInfoOf('postgres');
    return { user: 'postgres', uid, gid };
  } catch {
    return { missing: 'running as root and there is no postgres user to run a server as' };
  }
}

function userInfoOf(name: string): { uid: number; gid: number } {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${name}:`));
  if (!line) throw new Error(`no user ${name}`);
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/**
 * A PostgreSQL server of a suite's own — its own data directory, port and socket — for the faults that
 * act on the whole server (a restart, a crash), which the shared server on 5432 must never see: other
 * suites and other checkouts use it. `unavailable()` says why this machine cannot run one (then the
 * suite prints the reason and skips that fault).
 */
export class PrivatePostgres {
  private dir?: string;
  private readonly binaries = serverBinaries();
  private readonly owner = runAs();

  /** `settings`: server settings of this server's own (`shared_preload_libraries`, `autovacuum`, …), given at every start. */
  constructor(
    readonly port: number,
    private readonly settings: Record<string, string> = {},
  ) {}

  unavailable(): string | undefined {
    if ('missing' in this.binaries) return this.binaries.missing;
    if ('missing' in this.owner) return this.owner.missing;
    return undefined;
  }

  /** A superuser URL of `database` on this server. */
  url(database: string): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  async start(): Promise<void> {
    const reason = this.unavailable();
    if (reason) throw new Error(`cannot run a private PostgreSQL server: ${reason}`);
    if (!this.dir) {
      this.dir = mkdtempSync(join(tmpdir(), 'e2e-postgres-'));
      if ('uid' in this.owner && this.owner.uid !== undefined) chownSync(this.dir, this.owner.uid, this.owner.gid!);
      await this.pg('initdb', ['-D', this.data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8', '--locale', 'C']);
    }
    await this.pg('pg_ctl', ['-D', this.data, '-l', this.log, '-o', this.options, '-w', '-t', '60', 'start']);
  }

  /**
   * Stops the server and starts it again. `fast` is an orderly restart (sessions ended, a checkpoint);
   * `immediate` is a crash as far as the data is concerned (no checkpoint: the start replays the WAL).
   * Resolves once the server accepts connections again.
   */
  /** The longest restart so far, from the stop's start to the server accepting connections again (ms). */
  longestRestartMs = 0;

  async restart(mode: ShutdownMode): Promise<void> {
    const started = Date.now();
    await this.pg('pg_ctl', ['-D', this.data, '-m', mode, '-w', '-t', '60', 'stop']);
    await this.pg('pg_ctl', ['-D', this.data, '-l', this.log, '-o', this.options, '-w', '-t', '60', 'start']);
    this.longestRestartMs = Math.max(this.longestRestartMs, Date.now() - started);
  }

  async destroy(): Promise<void> {
    if (!this.dir) return;
    await this.pg('pg_ctl', ['-D', this.data, '-m', 'immediate', '-w', 'stop']).catch(() => undefined);
    rmSync(this.dir, { recursive: true, force: true });
    this.dir = undefined;
  }

  /** What the server has logged so far (its log file), or '' before it started. */
  logText(): string {
    return this.dir && existsSync(this.log) ? readFileSync(this.log, 'utf8') : '';
  }

  private get data(): string {
    return join(this.dir!, 'data');
  }

  private get log(): string {
    return join(this.dir!, 'postgres.log');
  }

  /** TCP on 127.0.0.1 only, the socket in the suite's directory (not /var/run/postgresql, which the shared server owns). */
  private get options(): string {
    const settings = Object.entries(this.settings).map(([name, value]) => ` -c ${name}=${value}`);
    return `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c max_connections=200${settings.join('')}`;
  }

  private async pg(program: string, args: string[]): Promise<void> {
    const { bin } = this.binaries as { bin: string };
    const user = 'user' in this.owner ? this.owner.user : undefined;
    const [command, commandArgs] = user ? ['runuser', ['-u', user, '--', join(bin, program), ...args]] : [join(bin, program), args];
    try {
      await run(command, commandArgs, { timeout: 120_000, cwd: this.dir });
    } catch (error) {
      const e = error as { stderr?: string; stdout?: string; message: string };
      throw new Error(`${program} ${args.at(-1)} failed: ${(e.stderr || e.stdout || e.message).trim().slice(-2000)}`);
    }
  }
}
