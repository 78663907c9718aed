import type { Server as HttpServer, IncomingMessage } from 'node:http'
import type { Socket } from 'node:net'
import type { Logger } from '../observability/logger.ts'

/** At most one warning about connections closed for the per-address share in this many milliseconds. */
const WARN_EVERY_MS = 10_000

/** What the guard enforces on the connections of the MCP listener. */
export interface ConnectionGuardOptions {
  /** Connections one client address may hold open at once (`limits.connectionsPerIp`); further ones are closed at once. */
  perAddress: number
  /**
   * Time a new connection has to send its first request's headers (`limits.headersTimeout`); then it is closed.
   * Node bounds a request's headers only once their first byte has arrived: a connection that never sends one
   * would stay open for good.
   */
  firstRequestMs: number
  /** HTTPS: a connection is silent from the end of its TLS handshake (the handshake has its own bound). */
  tls: boolean
  log: Logger
}

/**
 * Closes the connections that would let one client address lock the others out: those beyond the address's
 * share, and those that send nothing. A connection that sent a request is no longer watched here: Node's own
 * timeouts take over (headersTimeout and requestTimeout for each request, keepAliveTimeout between requests),
 * and a response that lasts, such as an SSE stream, is never cut by them.
 */
export function guardConnections (server: HttpServer, options: ConnectionGuardOptions): void {
  const open = new Map<string, number>()
  const silent = new WeakMap<Socket, NodeJS.Timeout>()
  let warnedAt = -Infinity
  let refusedSinceWarning = 0

  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress
    if (address === undefined) return
    const count = (open.get(address) ?? 0) + 1
    if (count > options.perAddress) {
      socket.destroy()
      refusedSinceWarning++
      const now = performance.now()
      if (now - warnedAt >= WARN_EVERY_MS) {
        warnedAt = now
        options.log.warn({ address, limit: 'limits.connectionsPerIp', open: count - 1, refused: refusedSinceWarning }, 'closed new connections from an address that holds limits.connectionsPerIp connections')
        refusedSinceWarning = 0
      }
      return
    }
    open.set(address, count)
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1
      if (left === 0) open.delete(address)
      else open.set(address, left)
    })
    if (!options.tls) watchSilence(socket)
  })
  if (options.tls) server.on('secureConnection', watchSilence)
  server.on('request', (request: IncomingMessage) => {
    const timer = silent.get(request.socket)
    if (timer === undefined) return
    clearTimeout(timer)
    silent.delete(request.socket)
  })

  function watchSilence (socket: Socket): void {
    if (socket.destroyed) return
    const timer = setTimeout(() => {
      silent.delete(socket)
      socket.destroy()
    }, options.firstRequestMs)
    timer.unref()
    silent.set(socket, timer)
    socket.once('close', () => {
      clearTimeout(timer)
      silent.delete(socket)
    })
  }
}
