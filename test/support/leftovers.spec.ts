import net from 'node:net';
import timers from 'node:timers';
import timersPromises from 'node:timers/promises';
import { Leftovers } from './leftovers';

/** A test file's global as jest-environment-node gives it: the process's own timer functions. */
function fileGlobal(): Record<string, any> {
  return { setTimeout, setInterval, clearTimeout, clearInterval };
}

describe('Leftovers', () => {
  it('names a timer left armed, with where it was armed, and forgets it once it fires or is cleared', async () => {
    const global = fileGlobal();
    const leftovers = new Leftovers(global);
    const fired = new Promise<void>((resolve) => global.setTimeout(resolve, 5));
    const cleared = global.setTimeout(() => undefined, 60_000);
    const interval = global.setInterval(() => undefined, 60_000);
    const left = global.setTimeout(() => undefined, 60_000);
    try {
      global.clearTimeout(cleared);
      await fired;
      const found = leftovers.list();
      expect(found).toHaveLength(2);
      expect(found[0]).toMatch(/^setInterval\(…, 60000 ms\), armed .*leftovers\.spec\.ts/);
      expect(found[1]).toMatch(/^setTimeout\(…, 60000 ms\), armed .*leftovers\.spec\.ts/);
      global.clearInterval(interval);
      expect(leftovers.list()).toHaveLength(1);
    } finally {
      clearInterval(interval);
      clearTimeout(left);
    }
    expect(leftovers.list()).toEqual([]);
  });

  it('passes over timers that do not keep the process alive, and those cleared by their number', () => {
    const global = fileGlobal();
    const leftovers = new Leftovers(global);
    const unref = global.setTimeout(() => undefined, 60_000).unref();
    const byNumber = global.setTimeout(() => undefined, 60_000);
    clearTimeout(Number(byNumber));
    try {
      expect(leftovers.list()).toEqual([]);
    } finally {
      clearTimeout(unref);
    }
  });

  it('counts timers armed outside the file global (node:timers, timers/promises), which it cannot trace', async () => {
    const leftovers = new Leftovers(fileGlobal());
    const controller = new AbortController();
    const asleep = timersPromises.setTimeout(60_000, undefined, { signal: controller.signal }).catch(() => undefined);
    const direct = timers.setTimeout(() => undefined, 60_000);
    try {
      expect(leftovers.list()).toEqual(["2 more Timeout (armed outside the file's global: no stack)"]);
    } finally {
      controller.abort();
      timers.clearTimeout(direct);
      await asleep;
    }
    expect(leftovers.list()).toEqual([]);
  });

  it('arms what it is given to arm: the callback runs with its arguments', async () => {
    const global = fileGlobal();
    new Leftovers(global);
    const got = await new Promise<unknown[]>((resolve) => global.setTimeout((...args: unknown[]) => resolve(args), 1, 'a', 2));
    expect(got).toEqual(['a', 2]);
  });

  it('names a server opened after it started, and not one that was already open', async () => {
    const before = net.createServer();
    await new Promise<void>((resolve) => before.listen(0, '127.0.0.1', resolve));
    const leftovers = new Leftovers(fileGlobal());
    const after = net.createServer();
    await new Promise<void>((resolve) => after.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = after.address() as net.AddressInfo;
      expect(leftovers.list()).toEqual([`a server listening on {"address":"127.0.0.1","family":"IPv4","port":${port}}`]);
    } finally {
      await new Promise((resolve) => after.close(resolve));
      await new Promise((resolve) => before.close(resolve));
    }
    await new Promise((resolve) => setTimeout(resolve, 20)); // a closed server's handle is listed a little longer
    expect(leftovers.list()).toEqual([]);
  });
});
