import { BlockList, isIP } from 'node:net'
import type { ConfigProblem } from './interpolate.ts'

/**
 * A listener on an address other machines can reach, with auth off, serves every upstream to anyone who
 * reaches its port, and the `Mcp-Session-Id` a client is handed is then its only credential. The gateway
 * refuses to start so unless the operator says it means it (`server.allowUnauthenticated: true`).
 */

/** What of the configuration decides whether the MCP listener is open to anyone. */
export interface ListenerExposure {
  server: { host: string, allowUnauthenticated: boolean }
  auth: { tokens: readonly unknown[], oauth?: unknown }
}

const LOOPBACK = new BlockList()
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4')
LOOPBACK.addAddress('::1', 'ipv6')

/** `localhost`, `127.0.0.0/8` and `::1` (bracketed or IPv4-mapped too): addresses only this machine reaches. */
export function isLoopbackHost (host: string): boolean {
  const name = host.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1')
  if (name === 'localhost' || name.endsWith('.localhost')) return true
  const version = isIP(name)
  return version !== 0 && LOOPBACK.check(name, version === 4 ? 'ipv4' : 'ipv6')
}

export function authConfigured (auth: ListenerExposure['auth']): boolean {
  return auth.tokens.length > 0 || auth.oauth !== undefined
}

/** What the operator is told, with the option that put the address there (`server.host`, or `--host`). */
export function openListenerMessage (host: string): string {
  return `'${host}' is reachable from other machines and auth is off (no auth.tokens, no auth.oauth), so anyone who reaches the port may use every upstream; configure auth.tokens or auth.oauth, listen on 127.0.0.1, or set server.allowUnauthenticated: true to serve without auth on purpose`
}

/** The problem of a listener open to anyone that the operator did not allow, or none. */
export function openListenerProblems (config: ListenerExposure, at = 'server.host'): ConfigProblem[] {
  if (config.server.allowUnauthenticated || authConfigured(config.auth) || isLoopbackHost(config.server.host)) return []
  return [{ path: at, message: openListenerMessage(config.server.host) }]
}
