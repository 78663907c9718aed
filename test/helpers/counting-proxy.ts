import { once } from 'node:events'
import { createServer, request as httpRequest, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { keepIdleConnections } from './idle-connections.ts'

type Json = Record<string, unknown>

/**
 * An HTTP proxy in front of an upstream MCP server that counts the JSON-RPC requests passing through it (by
 * method, and by tool name for tools/call), so a test can tell how often the upstream was asked to run a tool,
 * whichever gateway process asked. Bodies go through unchanged; responses (SSE included) are streamed.
 */
export class CountingProxy {
  readonly #server: Server
  #target: URL
  /**
   * Requests seen, by JSON-RPC method (tools/call also as `tools/call <name>`), by HTTP method as `HTTP <method>`;
   * JSON-RPC responses (answers passed on to the upstream) as `response`.
   */
  readonly counts = new Map<string, number>()
  /** The params of every JSON-RPC request seen, by method, in order (see `countWhere`). */
  readonly #params = new Map<string, Json[]>()
  /** The Mcp-Session-Id of every session ended with DELETE. */
  readonly deleted = new Set<string>()
  url = ''

  constructor (target: string) {
    this.#target = new URL(target)
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (chunk: Buffer) => chunks.push(chunk))
      req.on('end', () => {
        const body = Buffer.concat(chunks)
        this.#bump(`HTTP ${req.method ?? ''}`)
        const session = req.headers['mcp-session-id']
        if (req.method === 'DELETE' && typeof session === 'string') this.deleted.add(session)
        if (body.length > 0) this.#count(body)
        const target = { host: this.#target.hostname, port: this.#target.port, method: req.method, path: req.url, headers: req.headers }
        const upstream = httpRequest(target, (response) => {
          res.writeHead(response.statusCode ?? 502, response.headers)
          response.pipe(res)
        })
        upstream.on('error', () => { res.destroy() })
        res.on('close', () => upstream.destroy())
        upstream.end(body)
      })
    })
  }

  /** Sends what comes from now on to another upstream (one started again on another port). */
  retarget (target: string): void {
    this.#target = new URL(target)
  }

  count (key: string): number {
    return this.counts.get(key) ?? 0
  }

  /**
   * Requests of `key` (as `count` names them) whose params satisfy `match`: a test that shares the proxy with
   * others running at the same time counts only its own (`tools/call <name>` matches on the call's arguments).
   */
  countWhere (key: string, match: (params: Json) => boolean): number {
    const seen = this.#params.get(key) ?? []
    const of = key.startsWith('tools/call ') ? (params: Json) => (params.arguments ?? {}) as Json : (params: Json) => params
    return seen.filter((params) => match(of(params))).length
  }

  #count (body: Buffer): void {
    let message: Json
    try {
      message = JSON.parse(body.toString('utf8')) as Json
    } catch {
      return
    }
    // A JSON-RPC response (a client's answer the gateway passes on to the upstream) counts as `response`.
    if (typeof message.method !== 'string') {
      if ('result' in message || 'error' in message) this.#bump('response')
      return
    }
    const keys = [message.method]
    const name = (message.params as Json | undefined)?.name
    if (message.method === 'tools/call' && typeof name === 'string') keys.push(`tools/call ${name}`)
    const params = (message.params ?? {}) as Json
    for (const key of keys) {
      this.#bump(key)
      const seen = this.#params.get(key)
      if (seen === undefined) this.#params.set(key, [params])
      else seen.push(params)
    }
  }

  #bump (key: string): void {
    this.counts.set(key, this.count(key) + 1)
  }

  async listen (): Promise<string> {
    keepIdleConnections(this.#server)
    this.#server.listen(0, '127.0.0.1')
    await once(this.#server, 'listening')
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}${this.#target.pathname}`
    return this.url
  }

  async close (): Promise<void> {
    this.#server.closeAllConnections()
    this.#server.close()
    await once(this.#server, 'close')
  }
}
