import { createServer, Server, Socket, connect } from 'node:net';
import { freePort } from './free-port';

/**
 * A TCP relay in front of the real PostgreSQL, so a test can cut the network between an app and its
 * database (every connection dropped, new ones refused) and restore it. Nothing is faked: every
 * byte that passes goes to the real server.
 */
export class TcpProxy {
  private server?: Server;
  private readonly sockets = new Set<Socket>();
  private holding = false;
  private readonly held: (() => void)[] = [];
  /** Bytes the clients sent towards the server so far: what an app asked of its database. */
  sent = 0;

  private constructor(
    private readonly target: { host: string; port: number },
    readonly port: number,
  ) {}

  static async start(target: { host: string; port: number }): Promise<TcpProxy> {
    // Outside the ephemeral range: while cut, the port is closed, and a client's outgoing connection must not get it.
    const proxy = new TcpProxy(target, await freePort());
    await proxy.restore();
    return proxy;
  }

  /** Accepts connections again. */
  async restore(): Promise<void> {
    if (this.server) return;
    const server = createServer((client) => {
      this.sockets.add(client);
      client.on('close', () => this.sockets.delete(client));
      client.on('error', () => undefined);
      const wire = () => {
        if (client.destroyed) return;
        const upstream = connect(this.target.port, this.target.host);
        this.sockets.add(upstream);
        upstream.on('close', () => this.sockets.delete(upstream));
        upstream.on('error', () => undefined);
        client.on('data', (chunk: Buffer) => (this.sent += chunk.length));
        client.pipe(upstream).pipe(client);
        client.on('close', () => upstream.destroy());
        upstream.on('close', () => client.destroy());
      };
      if (this.holding) this.held.push(wire);
      else wire();
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.server = server;
  }

  /**
   * New connections are accepted and then left unanswered until `release()`, as a server too busy to
   * answer; the open ones keep working.
   */
  hold(): void {
    this.holding = true;
  }

  /** How many connections `hold` is keeping waiting. */
  get waiting(): number {
    return this.held.length;
  }

  /** Connects the connections kept waiting to the server, and new ones at once again. */
  release(): void {
    this.holding = false;
    for (const wire of this.held.splice(0)) wire();
  }

  /**
   * Stops every byte on the open connections, both ways, and holds new ones: a network partition,
   * where nothing is reset or closed and nothing arrives. `cut` ends it (then `restore`).
   */
  freeze(): void {
    this.hold();
    for (const socket of this.sockets) {
      socket.unpipe();
      socket.pause();
    }
  }

  /** Drops every open connection and refuses new ones, as a dead network or a stopped server would. */
  async cut(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    // Whatever `hold` or `freeze` kept waiting goes too: `restore` starts from a working network.
    this.holding = false;
    this.held.length = 0;
    for (const socket of this.sockets) socket.destroy();
    if (server) await new Promise((resolve) => server.close(resolve));
  }
}
