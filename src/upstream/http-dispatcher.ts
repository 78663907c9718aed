import { Agent, fetch as undiciFetch, type Dispatcher } from 'undici'
import type { FetchLike } from '@modelcontextprotocol/client'
import type { HttpUpstreamConfig } from '../config/schema.ts'

/**
 * One undici keep-alive pool per HTTP upstream. Streamable HTTP connections use it directly; the
 * legacy SSE transport gets it through the SDK's `fetch` option. Header and body timeouts are off
 * because a call may legitimately stay silent for as long as it runs; the call engine enforces the
 * configured timeouts per request instead.
 */
export interface UpstreamHttp {
  dispatcher: Dispatcher
  fetch: FetchLike
  close (): Promise<void>
}

/**
 * Sockets the pool may open: every connection of the upstream holds one for its standalone SSE stream
 * and needs one for the request in flight, so the configured number is raised to what the calls need.
 */
export function socketsFor (config: HttpUpstreamConfig): number {
  return Math.max(config.connections, 2 * (config.maxConcurrentCalls + 1))
}

export function createUpstreamHttp (config: HttpUpstreamConfig): UpstreamHttp {
  const agent = new Agent({
    connections: socketsFor(config),
    keepAliveTimeout: 30_000,
    connectTimeout: config.timeouts.connect,
    headersTimeout: 0,
    bodyTimeout: 0,
  })
  const fetch: FetchLike = (url, init) =>
    undiciFetch(url, { ...(init as Parameters<typeof undiciFetch>[1]), dispatcher: agent }) as unknown as Promise<Response>
  return {
    dispatcher: agent,
    fetch,
    close: () => agent.close(),
  }
}
