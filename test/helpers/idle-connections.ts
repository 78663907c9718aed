import type { Server } from 'node:http'

/**
 * Keeps a test server's idle keep-alive connections open far longer than a test waits between two requests.
 * Node closes them after 5 s by default: a client that reuses one just as it closes (a busy machine delays the
 * client's own idle timer) gets ECONNRESET on a request that never reached the server.
 */
export function keepIdleConnections (server: Server): void {
  server.keepAliveTimeout = 120_000
  server.headersTimeout = 125_000
}
