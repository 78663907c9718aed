import { Agent, fetch as undiciFetch } from 'undici'
import type { FetchLike } from '@modelcontextprotocol/client'
import type { HttpUpstreamConfig } from '../config/schema.ts'

/**
 * One undici keep-alive pool per HTTP upstream, handed to the SDK transports through their `fetch`
 * option. Body timeouts are off because SSE streams may idle for as long as a call runs; the call
 * timeout is enforced per request by the call engine instead.
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
    headersTimeout: config.timeouts.request,
    bodyTimeout: 0,
  })
  const fetch: FetchLike = (url, init) =>
    undiciFetch(url, { ...(init as Parameters<typeof undiciFetch>[1]), dispatcher: agent }) as unknown as Promise<Response>
  return {
    fetch,
    close: () => agent.close(),
  }
}
