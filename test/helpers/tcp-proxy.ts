import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net'

/**
 * What a cut does to connections made while it lasts:
 * - `refuse`: the port stops listening, so connecting fails at once (ECONNREFUSED), as when Redis is down;
 * - `blackhole`: connections are accepted and everything sent on them is swallowed, never answered, as
 *   with a route that lost its backend behind a proxy or load balancer. Such a connection stays dead after
 *   restore() (what went into it is lost): the client has to give up on it by itself.
 */
export type CutMode = 'refuse' | 'blackhole'

async function listen (server: Server, port: number): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject)
      resolve()
    })
  })
}

/**
 * A TCP proxy on a loopback port in front of `target` (the machine's Redis) that a test can cut and
 * restore. Only the proxy's own connections are touched: Redis itself keeps running for everybody else.
 */
export class TcpProxy {
  readonly #target: { host: string, port: number }
  #server: Server
  /** Forwarded connections: the client's socket and the one to the target. */
  readonly #pairs = new Set<[Socket, Socket]>()
  /** Blackholed connections (kept open, never answered). */
  readonly #held = new Set<Socket>()
  #port = 0
  #mode: CutMode | undefined

  private constructor (target: { host: string, port: number }) {
    this.#target = target
    this.#server = this.#listener()
  }

  /** Starts a proxy for `target` (a `redis://host:port` URL) on a free loopback port. */
  static async start (target: string): Promise<TcpProxy> {
    const url = new URL(target)
    const proxy = new TcpProxy({ host: url.hostname, port: Number(url.port || 6379) })
    await listen(proxy.#server, 0)
    proxy.#port = (proxy.#server.address() as AddressInfo).port
    return proxy
  }

  get port (): number {
    return this.#port
  }

  /** The Redis URL through the proxy. */
  get url (): string {
    return `redis://127.0.0.1:${this.#port}`
  }

  /** Destroys every connection through the proxy; connections made until restore() are refused or blackholed. */
  async cut (mode: CutMode = 'refuse'): Promise<void> {
    if (this.#mode !== undefined) throw new Error(`the proxy is already cut (${this.#mode})`)
    this.#mode = mode
    // The listening socket closes at once; connections still open do not keep the port listening.
    if (mode === 'refuse') this.#server.close()
    this.#dropForwarded()
    await new Promise((resolve) => setImmediate(resolve))
  }

  /** Forwards new connections again (on the same port). Blackholed connections stay dead. */
  async restore (): Promise<void> {
    const mode = this.#mode
    if (mode === undefined) return
    if (mode === 'refuse') {
      this.#server = this.#listener()
      await listen(this.#server, this.#port)
    }
    this.#mode = undefined
  }

  async close (): Promise<void> {
    this.#dropForwarded()
    for (const socket of this.#held) socket.destroy()
    this.#held.clear()
    if (this.#server.listening) await new Promise((resolve) => this.#server.close(resolve))
  }

  #listener (): Server {
    return createServer((socket) => { this.#accept(socket) })
  }

  #accept (client: Socket): void {
    client.on('error', () => {})
    if (this.#mode === 'blackhole') {
      this.#held.add(client)
      client.resume()
      client.once('close', () => this.#held.delete(client))
      return
    }
    const upstream = connect(this.#target.port, this.#target.host)
    upstream.on('error', () => {})
    const pair: [Socket, Socket] = [client, upstream]
    this.#pairs.add(pair)
    const drop = (): void => {
      this.#pairs.delete(pair)
      client.destroy()
      upstream.destroy()
    }
    client.once('close', drop)
    upstream.once('close', drop)
    client.pipe(upstream)
    upstream.pipe(client)
  }

  #dropForwarded (): void {
    for (const [client, upstream] of this.#pairs) {
      client.destroy()
      upstream.destroy()
    }
    this.#pairs.clear()
  }
}
