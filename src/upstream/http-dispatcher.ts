import { Agent, fetch as undiciFetch } from 'undici'
import type { FetchLike } from '@modelcontextprotocol/client'
import type { HttpUpstreamConfig } from '../config/schema.ts'

/**
 * One undici keep-alive pool per HTTP upstream, handed to the SDK transports through their `fetch`
 * option. Header and body timeouts are off because a call may legitimately stay silent for as long as
 * it runs; the call engine enforces the configured timeouts per request instead.
 */
export interface UpstreamHttp {
  fetch: FetchLike
  close (): Promise<void>
}

export function createUpstreamHttp (config: HttpUpstreamConfig): UpstreamHttp {
  const agent = new Agent({
    connections: config.connections,
    keepAliveTimeout: 30_000,
    connectTimeout: config.timeouts.connect,
    // A long tools/call answered with plain JSON sends no headers until it ends: the call engine
    // enforces timeouts.call / timeouts.request per request instead of a hidden socket timeout.
    headersTimeout: 0,
    bodyTimeout: 0,
  })
  const fetch: FetchLike = (url, init) =>
    undiciFetch(url, { ...(init as Parameters<typeof undiciFetch>[1]), dispatcher: agent }) as unknown as Promise<Response>
  return {
    fetch,
    close: () => agent.close(),
  }
}
