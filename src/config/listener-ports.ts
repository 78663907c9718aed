import type { ConfigProblem } from './interpolate.ts'

/**
 * The admin API listens on a port of its own: on the MCP listener's port and an address both cover, one of
 * the two listeners could not start (EADDRINUSE). Two listeners cover the same address when their hosts are
 * written the same, or when either is a wildcard (`0.0.0.0`, `::`), which takes the port on every address.
 * Port 0 picks a free port for each, so it never clashes.
 */

const WILDCARDS = new Set(['0.0.0.0', '::', '[::]', '::0'])

interface Listeners {
  server: { host: string, port: number }
  admin?: { host: string, port: number } | undefined
}

export function sharedPortProblems ({ server, admin }: Listeners): ConfigProblem[] {
  if (admin === undefined || admin.port === 0 || admin.port !== server.port) return []
  const same = admin.host.toLowerCase() === server.host.toLowerCase()
  if (!same && !WILDCARDS.has(admin.host) && !WILDCARDS.has(server.host)) return []
  const where = same ? admin.host : `${server.host} (server.host) and ${admin.host} (admin.host); ${WILDCARDS.has(admin.host) ? admin.host : server.host} takes it on every address`
  return [{ path: 'admin.port', message: `${admin.port} is the MCP listener's port too (server.port) on ${where}: one of them could not start; give the admin API a port of its own (0 picks a free one)` }]
}
