import { once } from 'node:events'
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net'

/** The code of an SSLRequest or GSSENCRequest: another untyped startup message follows it. */
const ENCRYPTION_REQUESTS = new Set([80877103, 80877104])

/**
 * A TCP proxy in front of a PostgreSQL server that counts the round trips its clients make: every simple Query
 * ('Q') and every Sync ('S') that ends an extended-protocol query (Parse, Bind, Execute… sent in one go). Bytes
 * pass through unchanged.
 */
export class PgRoundTrips {
  readonly #server: Server
  readonly #sockets = new Set<Socket>()
  /** Round trips so far, over every connection. */
  count = 0
  port = 0

  constructor (target: { host: string, port: number }) {
    this.#server = createServer((client) => {
      const server = connect(target.port, target.host)
      this.#sockets.add(client).add(server)
      client.on('data', this.#counter())
      client.pipe(server)
      server.pipe(client)
      for (const [a, b] of [[client, server], [server, client]] as const) {
        a.on('error', () => b.destroy())
        a.on('close', () => {
          b.destroy()
          this.#sockets.delete(a)
        })
      }
    })
  }

  async listen (): Promise<number> {
    this.#server.listen(0, '127.0.0.1')
    await once(this.#server, 'listening')
    this.port = (this.#server.address() as AddressInfo).port
    return this.port
  }

  async close (): Promise<void> {
    for (const socket of this.#sockets) socket.destroy()
    await new Promise<void>((resolve) => this.#server.close(() => resolve()))
  }

  /** Splits one client's stream into frontend messages and counts those that end a round trip. */
  #counter (): (chunk: Buffer) => void {
    let pending = Buffer.alloc(0)
    let untyped = true
    return (chunk) => {
      pending = Buffer.concat([pending, chunk])
      for (;;) {
        const header = untyped ? 4 : 5
        if (pending.length < header) return
        const length = pending.readInt32BE(untyped ? 0 : 1)
        const size = untyped ? length : length + 1
        if (pending.length < size) return
        if (untyped) {
          untyped = length === 8 && ENCRYPTION_REQUESTS.has(pending.readInt32BE(4))
        } else if (pending[0] === 0x51 || pending[0] === 0x53) {
          this.count++
        }
        pending = pending.subarray(size)
      }
    }
  }
}
