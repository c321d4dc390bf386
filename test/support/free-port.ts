import { AddressInfo, createServer } from 'node:net';

/** A TCP port free on 127.0.0.1 right now (the OS picks it). No side effects: the demo and the bench use it too. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
