import { readFileSync } from 'node:fs';
import { connect, createServer, Socket } from 'node:net';
import { freePort } from './free-port';

/**
 * A port handed to an app is free when chosen and taken only when the app listens, a few hundred
 * milliseconds later. If it lies in the kernel's ephemeral range, any outgoing connection of that
 * moment (a Kafka client, a pg pool, fetch) can be given it meanwhile, and the app dies with
 * EADDRINUSE (CI, 2026-12-04: the relay in relay-keeps-per-key-order on 127.0.0.1:36959).
 */
describe('freePort', () => {
  const [ephemeralLow, ephemeralHigh] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);

  it('never hands out a port an outgoing connection could be given meanwhile', async () => {
    const ports = [];
    for (let i = 0; i < 50; i++) ports.push(await freePort());
    const ephemeral = ports.filter((port) => port >= ephemeralLow && port <= ephemeralHigh);
    expect(ephemeral).toEqual([]);
  });

  it('hands out a port nobody listens on, and not the same one twice in a row', async () => {
    const ports = new Set<number>();
    for (let i = 0; i < 200; i++) {
      const port = await freePort();
      expect(ports.has(port)).toBe(false);
      ports.add(port);
      await expect(listenOn(port)).resolves.toBeUndefined();
    }
  });

  it('skips a port another process already listens on', async () => {
    const next = await freePort();
    // Occupy the ports right after it: the allocator walks upward, so it must step over them.
    const taken = [next + 1, next + 2, next + 3];
    const servers = await Promise.all(taken.map(occupy));
    try {
      const port = await freePort();
      expect(taken).not.toContain(port);
      await expect(listenOn(port)).resolves.toBeUndefined();
    } finally {
      await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
    }
  });

  it('leaves nothing open', async () => {
    const port = await freePort();
    const refused = await new Promise<boolean>((resolve) => {
      const socket: Socket = connect(port, '127.0.0.1');
      socket.once('connect', () => (socket.destroy(), resolve(false)));
      socket.once('error', () => resolve(true));
    });
    expect(refused).toBe(true);
  });
});

async function occupy(port: number) {
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', resolve));
  return server;
}

async function listenOn(port: number): Promise<void> {
  const server = await occupy(port);
  await new Promise((resolve) => server.close(resolve));
}
