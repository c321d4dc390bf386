import { randomUUID } from 'node:crypto';
import { ops, OpsRun } from './support/ops-cli';
import { OrdersDb } from './support/orders-db';

const unknownReplay = randomUUID();

/** Bad usage: [name, args, what the one stderr line says]. Each exits 2 and records nothing. */
const badUsage: [string, string[], RegExp][] = [
  ['an unparseable --from', ['--from', 'yesterday'], /--from must be an outbox sequence number or an ISO 8601 time/],
  ['a --from time without its offset', ['--from', '2025-01-31T14:00:00'], /--from must be .* with its offset/],
  [
    'a --to time before --from',
    ['--from', '2025-02-01T00:00:00Z', '--to', '2025-01-31T23:59:59Z'],
    /--to \(2025-01-31T23:59:59.000Z\) is before --from/,
  ],
  ['a --to sequence before --from', ['--from', '10', '--to', '9'], /--to \(sequence 9\) is before --from \(sequence 10\)/],
  ['--rate 0', ['--from', '1', '--rate', '0'], /--rate must be a number of messages per second above 0/],
  ['a negative --rate', ['--from', '1', '--rate=-5'], /--rate must be/],
  ['a --rate that is no number', ['--from', '1', '--rate', 'fast'], /--rate must be/],
  ['an unknown flag', ['--from', '1', '--everything'], /unknown option '--everything'/],
  ['no --from and no --resume', ['--json'], /--from <ISO time\|sequence> is required/],
  ['--resume with range flags', ['--resume', unknownReplay, '--from', '1', '--tenant', 'acme'], /do not combine it with --from, --tenant/],
  ['--resume of something that is no replay id', ['--resume', 'last'], /--resume takes the replay id/],
  ['a stray argument', ['--from', '1', 'everything'], /too many arguments/],
];

describe('outbox:replay rejects bad usage with exit 2 and records nothing', () => {
  const db = new OrdersDb();
  const runs = new Map<string, OpsRun>();
  let replaysBefore: number;

  const replays = async () => Number((await db.pool.query('SELECT count(*) AS n FROM outbox_replays')).rows[0].n);

  beforeAll(async () => {
    replaysBefore = await replays();
    // Every run boots Nest: a few at a time, so a busy machine is not swamped.
    for (let i = 0; i < badUsage.length; i += 4) {
      const chunk = badUsage.slice(i, i + 4);
      const results = await Promise.all(chunk.map(([, args]) => ops(['outbox:replay', ...args])));
      chunk.forEach(([name], j) => runs.set(name, results[j]));
    }
  }, 240_000);
  afterAll(() => db.close());

  it.each(badUsage)('%s', (name, _args, reason) => {
    const run = runs.get(name)!;
    expect({ status: run.status, stdout: run.stdout }).toEqual({ status: 2, stdout: '' });
    const lines = run.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(reason);
  });

  it('records no replay for any of them', async () => {
    expect(await replays()).toBe(replaysBefore);
  });

  it('refuses (exit 1) to resume a replay that does not exist', async () => {
    const run = await ops(['outbox:replay', '--resume', unknownReplay]);
    expect(run.status).toBe(1);
    expect(run.stderr.trim()).toBe(`ops: no replay ${unknownReplay} (outbox_replays)`);
  }, 60_000);
});
