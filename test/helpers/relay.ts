/** A TCP relay in front of a server (the sandbox) that counts the connections it is given, and can close or cut them. */
import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';

export class Relay {
  private server: Server | undefined;
  /** Client-side sockets the relay holds, open or not. */
  readonly sockets: Socket[] = [];
  /** When set, the next bytes a client writes on a connection that already carried a request are dropped with the connection. */
  cutReusedConnections = false;
  url = '';

  constructor(private readonly targetPort: number) {}

  async start(): Promise<this> {
    this.server = createServer((client) => {
      this.sockets.push(client);
      const upstream = connect(this.targetPort, '127.0.0.1');
      let requests = 0;
      client.on('data', (chunk) => {
        if (this.cutReusedConnections && requests > 0) {
          client.destroy();
          upstream.destroy();
          return;
        }
        requests += 1;
        upstream.write(chunk);
      });
      upstream.pipe(client);
      client.on('end', () => upstream.end());
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  get connections(): number {
    return this.sockets.length;
  }

  get open(): number {
    return this.sockets.filter((s) => !s.destroyed).length;
  }

  /** Closes every connection from the server's side, as a server does with idle keep-alive connections. */
  closeAll(): void {
    for (const socket of this.sockets) socket.end();
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}
