/**
 * Where a benchmark's CPU went: per process (the apps, the bench itself), PostgreSQL, the Kafka broker
 * and the machine as a whole, read from /proc. Linux only: elsewhere every reading is NaN and the
 * reports print "n/a". Process times come in clock ticks of 10 ms, so a part is only worth reporting
 * over a drain of a second or more.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const TICK_MS = 10; // USER_HZ is 100 on every Linux this runs on

/** The fields of /proc/<pid>/stat after the command name (which may itself hold spaces and parentheses). */
function statFields(pid: number | string): { comm: string; fields: string[] } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = text.lastIndexOf(')');
    return { comm: text.slice(text.indexOf('(') + 1, close), fields: text.slice(close + 2).split(' ') };
  } catch {
    return undefined;
  }
}

/** User plus system CPU a process (all its threads) has used so far, in ms. */
export function processCpuMs(pid: number): number {
  const stat = statFields(pid);
  if (!stat) return NaN;
  const [utime, stime] = stat.fields.slice(11, 13).map(Number);
  return (utime + stime) * TICK_MS;
}

/**
 * Every PostgreSQL process on the machine (the postmaster, its backends, autovacuum, the WAL writer…),
 * plus the backends that exited since the postmaster started (it reaps them, so their time is in its
 * children's). A backend that exits between two readings is counted in the second.
 */
export function postgresCpuMs(): number {
  const pids = readdirSync('/proc', { withFileTypes: true }).filter((entry) => /^\d+$/.test(entry.name));
  let total = 0;
  const postgres = new Map<string, string[]>();
  for (const { name } of pids) {
    const stat = statFields(name);
    if (stat?.comm === 'postgres') postgres.set(name, stat.fields);
  }
  for (const fields of postgres.values()) {
    const [utime, stime, cutime, cstime] = fields.slice(11, 15).map(Number);
    // The postmaster is the postgres process whose parent is not one.
    total += utime + stime + (postgres.has(fields[1]) ? 0 : cutime + cstime);
  }
  return postgres.size ? total * TICK_MS : NaN;
}

/**
 * The pid of the broker scripts/infra.sh runs on `port` (state in .cache/infra/test-broker[-<port>]),
 * if it is one of ours and alive; undefined for a broker started some other way.
 */
export function brokerPid(port: number): number | undefined {
  const state = join(process.cwd(), '.cache', 'infra', port === 29092 ? 'test-broker' : `test-broker-${port}`);
  try {
    const pid = Number(readFileSync(join(state, 'kafka.pid'), 'utf8').trim());
    const command = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return command.includes('kafka.Kafka') ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** CPU this process has used so far, in ms (process.cpuUsage: finer than /proc's ticks). */
export function ownCpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/** Busy and total CPU time of the whole machine so far, in ms summed over its CPUs (/proc/stat). */
function machineMs(): { busy: number; total: number } {
  try {
    const [user, nice, system, idle, iowait, irq, softirq, steal] = readFileSync('/proc/stat', 'utf8')
      .split('\n')[0]
      .trim()
      .split(/\s+/)
      .slice(1, 9)
      .map(Number);
    const busy = user + nice + system + irq + softirq + steal;
    return { busy: busy * TICK_MS, total: (busy + idle + iowait) * TICK_MS };
  } catch {
    return { busy: NaN, total: NaN };
  }
}

/** CPU per 1,000 rows of each part over one timed section, and how busy the machine's CPUs were. */
export interface CpuShare {
  /** ms of CPU per 1,000 rows, by part ("publisher", "postgres", "broker", …); NaN where it could not be read. */
  msPer1000: Record<string, number>;
  /** Fraction of all the machine's CPU time that was busy (any process) during the section. */
  machineBusy: number;
}

/**
 * Starts counting: `parts` name the readings to take (each a function returning a cumulative ms, such as
 * `() => processCpuMs(pid)`). Call the returned function when the section ends, with the rows it moved.
 */
export function startCpuShare(parts: Record<string, () => number>): (rows: number) => CpuShare {
  const before = Object.fromEntries(Object.entries(parts).map(([name, read]) => [name, read()]));
  const machineBefore = machineMs();
  return (rows) => {
    const machineAfter = machineMs();
    const msPer1000 = Object.fromEntries(Object.entries(parts).map(([name, read]) => [name, ((read() - before[name]) * 1000) / rows]));
    return {
      msPer1000,
      machineBusy: (machineAfter.busy - machineBefore.busy) / (machineAfter.total - machineBefore.total),
    };
  };
}
