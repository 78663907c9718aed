import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { createServer, request as httpRequest, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { startGatewayProcess, writeConfig, type GatewayProcess } from './process.ts'
import { sharedStore, type SharedKind, type SharedStore } from './shared-store.ts'
import { keepIdleConnections } from './idle-connections.ts'

/**
 * A plain round-robin HTTP balancer with no affinity: each request (and each SSE stream) goes to the next
 * live backend in turn, bodies streamed both ways. A backend that refuses the connection is skipped.
 */
export class RoundRobinBalancer {
  readonly #server: Server
  readonly #backends: string[]
  readonly #down = new Set<string>()
  #next = 0
  /** How many requests each backend received, by its base URL. */
  readonly served = new Map<string, number>()
  url = ''

  constructor (backends: string[]) {
    this.#backends = backends
    this.#server = createServer((req, res) => {
      // Request bodies are small JSON-RPC messages: read them whole, so a refused connection can be retried.
      const chunks: Buffer[] = []
      req.on('data', (chunk: Buffer) => chunks.push(chunk))
      req.on('end', () => { forward(Buffer.concat(chunks), 0) })
      const forward = (body: Buffer, attempt: number): void => {
        const live = this.#backends.filter((b) => !this.#down.has(new URL(b).origin))
        if (live.length === 0 || attempt >= live.length) {
          res.writeHead(502).end('no backend')
          return
        }
        const backend = new URL(live[this.#next++ % live.length]!)
        const target = { host: backend.hostname, port: backend.port, method: req.method, path: req.url, headers: req.headers }
        const upstream = httpRequest(target, (response) => {
          this.served.set(backend.origin, (this.served.get(backend.origin) ?? 0) + 1)
          res.writeHead(response.statusCode ?? 502, response.headers)
          response.pipe(res)
        })
        upstream.on('error', (err: NodeJS.ErrnoException) => {
          if (err.code === 'ECONNREFUSED' && !res.headersSent) {
            this.#down.add(backend.origin)
            forward(body, attempt + 1)
          } else {
            res.destroy()
          }
        })
        res.on('close', () => upstream.destroy())
        upstream.end(body)
      }
    })
  }

  async listen (): Promise<string> {
    keepIdleConnections(this.#server)
    this.#server.listen(0, '127.0.0.1')
    await once(this.#server, 'listening')
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/mcp`
    return this.url
  }

  /** Sends the requests of a backend that stopped to the one that replaced it. */
  replace (oldUrl: string, newUrl: string): void {
    const index = this.#backends.indexOf(oldUrl)
    if (index < 0) throw new Error(`${oldUrl} is not a backend`)
    this.#backends[index] = newUrl
  }

  /** Stops sending requests to a backend (it was killed). */
  markDown (backendUrl: string): void {
    this.#down.add(new URL(backendUrl).origin)
  }

  async close (): Promise<void> {
    this.#server.closeAllConnections()
    this.#server.close()
    await once(this.#server, 'close')
  }
}

export interface Cluster {
  /** The balancer's MCP endpoint. */
  url: string
  balancer: RoundRobinBalancer
  processes: GatewayProcess[]
  /** The store the processes share (a test reads what they stored through `store.open()`). */
  store: SharedStore
  /** Kills one process with SIGKILL and takes it out of the balancer. */
  kill (index: number): Promise<void>
  /**
   * Replaces one process as a rolling deploy does: SIGTERM, wait for it to exit (0), start a new one on the same
   * configuration in its place (in `processes` and in the balancer). Returns the new process.
   */
  replace (index: number): Promise<GatewayProcess>
  close (): Promise<void>
}

export interface ClusterOptions {
  count?: number
  /** The store the processes share (default redis): a fresh key prefix or schema, removed at close. */
  store?: SharedKind
  /** Entries of the `server` section (the helper adds a shared `stateSecret`). */
  server?: Record<string, unknown>
}

/**
 * `count` (default 3) real gateway processes (the CLI) on one shared store (a fresh Redis key prefix or
 * PostgreSQL schema), sharing a requestState secret, behind a round-robin balancer. `yaml` is the rest of the
 * config (tasks, upstreams, …) without `store` and `server`.
 */
export async function startCluster (yaml: string, options: ClusterOptions = {}): Promise<Cluster> {
  const count = options.count ?? 3
  const store = sharedStore(options.store ?? 'redis', 'mcpgw-cluster')
  const server = { stateSecret: randomBytes(32).toString('hex'), ...options.server }
  const file = writeConfig(`store: ${store.yaml}
server: ${JSON.stringify(server)}
${yaml}
`)
  const processes = await Promise.all(Array.from({ length: count }, async () => await startGatewayProcess(file)))
  const balancer = new RoundRobinBalancer(processes.map((p) => p.url))
  const url = await balancer.listen()
  return {
    url,
    balancer,
    processes,
    store,
    kill: async (index) => {
      const victim = processes[index]!
      balancer.markDown(victim.url)
      victim.child.kill('SIGKILL')
      await victim.exited
    },
    replace: async (index) => {
      const old = processes[index]!
      old.child.kill('SIGTERM')
      const [code] = await old.exited
      if (code !== 0) throw new Error(`process ${index} exited with ${String(code)}:\n${old.lines.join('\n')}`)
      const next = await startGatewayProcess(file)
      balancer.replace(old.url, next.url)
      processes[index] = next
      return next
    },
    close: async () => {
      await balancer.close()
      for (const p of processes) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGTERM')
      await Promise.all(processes.map(async (p) => await p.exited))
      await store.drop()
    },
  }
}
