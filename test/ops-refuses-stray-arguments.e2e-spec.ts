import fc from 'fast-check';
import { OrdersDb } from './support/orders-db';
import { json, ops } from './support/ops-cli';
import { privateDatabases, PrivateDatabases } from './support/private-stack';
import { LONG_RUN } from './support/search';

/** `  clients:revoke [options] <clientId>   Revoke…` -> ['clients:revoke', ['<clientId>']]; help is not a command of ours. */
function commandsOf(help: string): [name: string, args: string[]][] {
  const listed = help.slice(help.indexOf('Commands:')).split('\n').slice(1);
  return listed
    .map((line) => /^ {2}(\S+) (?:\[options\] )?((?:[<[]\S+[>\]] ?)*)/.exec(line))
    .filter((match): match is RegExpExecArray => match !== null && match[1] !== 'help')
    .map((match) => [match[1], match[2].split(' ').filter(Boolean)]);
}

/**
 * Bad usage exits 2 with one line and changes nothing (docs/operator-cli.md), and an argument a
 * command does not take is bad usage: an operator who typed `clients:revoke A B` meant two revocations,
 * `outbox:cleanup dry-run` a dry run. Until 2026-12-07 commander dropped what a command did not declare,
 * so both ran (`clients:revoke` revoked A alone and exited 0). A command that takes a list
 * (`[messageIds...]`) takes any number. The suite runs on databases of its own: on the code before, the commands really ran.
 * The command list is read from `--help`, so a new command is among those tried from the day it exists.
 */
describe('every ops command refuses arguments it does not take', () => {
  let databases: PrivateDatabases;
  let orders: OrdersDb;

  beforeAll(async () => {
    databases = await privateDatabases('opsstray');
    orders = new OrdersDb(databases.ordersUrl);
  }, 120_000);
  afterAll(async () => {
    await orders?.close();
  });

  it('exits 2 with one line naming the stray argument, for any command without a list (three a run, all under test:faults)', async () => {
    const help = await ops(['--help'], databases.env);
    const commands = commandsOf(help.stdout);
    expect(commands.map(([name]) => name)).toEqual(expect.arrayContaining(['clients:revoke', 'outbox:cleanup', 'audit', 'webhooks:retry']));
    const fixed = commands.filter(([, args]) => !args.some((arg) => arg.endsWith('...]')));
    // Each run of the CLI boots Nest (about a second of CPU): `npm test` tries three commands, a new
    // choice each run (a failure names the command); `npm run test:faults` tries them all.
    const [tried] = fc.sample(fc.shuffledSubarray(fixed, LONG_RUN ? { minLength: fixed.length } : { minLength: 3, maxLength: 3 }), 1);
    const runs = await Promise.all(
      tried.map(async ([name, args]) => {
        const placeholders = args.filter((arg) => arg.startsWith('<')).map(() => '00000000-0000-4000-8000-000000000000');
        const run = await ops([name, ...placeholders, 'stray'], databases.env);
        return { name, status: run.status, stderr: run.stderr.trim().split('\n'), stdout: run.stdout };
      }),
    );
    for (const run of runs) {
      expect({ name: run.name, status: run.status, stdout: run.stdout, lines: run.stderr.length }).toEqual({
        name: run.name,
        status: 2,
        stdout: '',
        lines: 1,
      });
      expect(run.stderr[0]).toMatch(/too many arguments/);
    }
  }, 120_000);

  it('clients:revoke A B revokes neither (it takes one client)', async () => {
    const created = await Promise.all(['a', 'b'].map(() => ops(['clients:create', '--tenant', 'stray-args', '--json'], databases.env)));
    const ids: string[] = created.map((run) => json(run).clientId);
    const run = await ops(['clients:revoke', ...ids], databases.env);
    expect(run.status).toBe(2);
    const { rows } = await orders.pool.query(
      'SELECT count(*)::int AS revoked FROM api_clients WHERE id = ANY($1) AND revoked_at IS NOT NULL',
      [ids],
    );
    expect(rows[0].revoked).toBe(0);
  }, 60_000);

  it('db:migrate --database takes only the names it lists (not what every object has)', async () => {
    const run = await ops(['db:migrate', '--database', 'constructor'], databases.env);
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/--database must be one of/);
  }, 60_000);
});
