import { createServer, Server, Socket, connect } from 'node:net';
import { freePort } from './free-port';

/** Kafka's API key of a Produce request. */
export const PRODUCE = 0;

/** One request a client sent, as the proxy saw it: its API key and its size in bytes. */
export interface KafkaRequest {
  apiKey: number;
  size: number;
}

/**
 * A TCP relay in front of a real Kafka broker that reads the clients' requests as they pass, so a test
 * can fail chosen requests ("the third Produce after the one over 1 MiB, and the three Produce
 * requests after it"), lose their answers (the broker wrote what they carried, the client never
 * hears it) or hold one back a while (a stalled broker). The broker must advertise the proxy's port (TestBroker's `advertisedPort`), so
 * that every connection a client opens after the bootstrap passes here too. Nothing is faked: every
 * byte that passes goes to the real broker, and a failed request is one whose connection died under
 * it, as when a broker or the network between dies.
 */
export class KafkaFaultProxy {
  private server?: Server;
  private readonly sockets = new Set<Socket>();
  private fault?: {
    at: (request: KafkaRequest) => boolean;
    started: boolean;
    left: number;
    done: (happened: boolean) => void;
    /** The broker gets each request and answers it; the answer is lost instead of the request. */
    afterTheBroker: boolean;
  };
  private delay?: { at: (request: KafkaRequest) => boolean; ms: number; done: () => void };

  private constructor(
    readonly port: number,
    private readonly brokerPort: number,
  ) {}

  /** Listens on a free port for a broker that will listen on `brokerPort`. */
  static async start(brokerPort: number): Promise<KafkaFaultProxy> {
    const proxy = new KafkaFaultProxy(await freePort(), brokerPort);
    const server = createServer((client) => proxy.wire(client));
    await new Promise<void>((resolve) => server.listen(proxy.port, '127.0.0.1', resolve));
    proxy.server = server;
    return proxy;
  }

  /**
   * Arms one fault: the first request `at` accepts, and after it the next `count - 1` Produce requests,
   * are not forwarded; the connection each came on is dropped instead. Resolves true once all `count`
   * were dropped, false if `disarm` came first. A client's retries of a dropped request count, so
   * `count` decides whether one send outlives them.
   */
  failProduce(at: (request: KafkaRequest) => boolean, count: number): Promise<boolean> {
    return new Promise((done) => (this.fault = { at, started: false, left: count, done, afterTheBroker: false }));
  }

  /**
   * Like `failProduce`, but each of the `count` requests reaches the broker, which handles it (a Produce
   * is written), and the connection dies as its answer comes back: the client cannot know it was written.
   */
  loseProduceAnswers(at: (request: KafkaRequest) => boolean, count: number): Promise<boolean> {
    return new Promise((done) => (this.fault = { at, started: false, left: count, done, afterTheBroker: true }));
  }

  /**
   * Arms one delay: the first request `at` accepts is held for `ms` before it goes to the broker, and
   * everything its client sends on that connection after it waits behind it (a broker that stalls, not
   * one that dies: the connection lives, the answer comes late). Resolves once it went on.
   */
  delayRequest(at: (request: KafkaRequest) => boolean, ms: number): Promise<void> {
    return new Promise((done) => (this.delay = { at, ms, done }));
  }

  disarm(): void {
    const fault = this.fault;
    this.fault = undefined;
    fault?.done(false);
    this.delay = undefined;
  }

  async stop(): Promise<void> {
    this.disarm();
    const server = this.server;
    this.server = undefined;
    for (const socket of this.sockets) socket.destroy();
    if (server) await new Promise((resolve) => server.close(resolve));
  }

  private wire(client: Socket): void {
    const upstream = connect(this.brokerPort, '127.0.0.1');
    for (const socket of [client, upstream]) {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
      socket.on('error', () => undefined);
    }
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    // Answers are forwarded whole, one frame at a time (a 4-byte size, then the correlation id of the
    // request answered), but for a request whose answer is to be lost: its connection dies there.
    const doomed = new Set<number>();
    let answers: Buffer = Buffer.alloc(0);
    upstream.on('data', (chunk: Buffer) => {
      answers = answers.length ? Buffer.concat([answers, chunk]) : chunk;
      while (answers.length >= 8) {
        const size = answers.readInt32BE(0);
        if (answers.length < 4 + size) break;
        if (doomed.has(answers.readInt32BE(4))) {
          client.destroy();
          return;
        }
        client.write(answers.subarray(0, 4 + size));
        answers = answers.subarray(4 + size);
      }
    });
    // Requests are forwarded whole, one frame at a time (a 4-byte size, the API key, its version, the
    // correlation id); a held frame holds back the ones after it.
    let pending: Buffer = Buffer.alloc(0);
    let holding = false;
    const forward = (): void => {
      while (!holding && pending.length >= 12) {
        const size = pending.readInt32BE(0);
        if (pending.length < 4 + size) break;
        const frame = pending.subarray(0, 4 + size);
        pending = pending.subarray(4 + size);
        const request = { apiKey: frame.readInt16BE(4), size };
        const fails = this.fails(request);
        if (fails === 'before the broker') {
          client.destroy();
          return;
        }
        if (fails === 'after the broker') doomed.add(frame.readInt32BE(8));
        const delay = this.delays(request);
        if (!delay) {
          upstream.write(frame);
          continue;
        }
        holding = true;
        client.pause();
        setTimeout(() => {
          holding = false;
          if (!upstream.destroyed) upstream.write(frame);
          delay.done();
          client.resume();
          forward();
        }, delay.ms);
      }
    };
    client.on('data', (chunk: Buffer) => {
      pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
      forward();
    });
  }

  private delays(request: KafkaRequest): { ms: number; done: () => void } | undefined {
    const delay = this.delay;
    if (!delay?.at(request)) return undefined;
    this.delay = undefined;
    return delay;
  }

  private fails(request: KafkaRequest): 'before the broker' | 'after the broker' | undefined {
    const fault = this.fault;
    if (!fault) return undefined;
    if (fault.started ? request.apiKey !== PRODUCE : !fault.at(request)) return undefined;
    fault.started = true;
    if (--fault.left === 0) {
      this.fault = undefined;
      fault.done(true);
    }
    return fault.afterTheBroker ? 'after the broker' : 'before the broker';
  }
}
