import { Agent, Headers as UndiciHeaders, fetch as undiciFetch, type Dispatcher } from 'undici'
import type { FetchLike } from '@modelcontextprotocol/client'
import type { HttpUpstreamConfig } from '../config/schema.ts'
import { traceHeadersOf } from '../observability/trace-context.ts'

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
 * Sockets the pool may open: every upstream session holds one for its standalone SSE stream, and every
 * call in flight needs one (per-call sessions: two), so the configured number is raised to what they need.
 */
export function socketsFor (config: HttpUpstreamConfig): number {
  return Math.max(config.connections, config.maxSessions + 2 * (config.maxConcurrentCalls + 1))
}

type UndiciInit = NonNullable<Parameters<typeof undiciFetch>[1]>

/**
 * The legacy SSE transport POSTs each message with headers of its own making: the trace context the message
 * carries in `params._meta` is added as the `traceparent` (and `tracestate`) header here.
 */
function withTraceHeaders (init: UndiciInit | undefined): UndiciInit | undefined {
  const carrier = init?.method === 'POST' && typeof init.body === 'string' ? traceHeadersOf(init.body) : undefined
  if (carrier === undefined) return init
  const headers = new UndiciHeaders(init!.headers)
  for (const [name, value] of Object.entries(carrier)) headers.set(name, value)
  return { ...init, headers }
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
    undiciFetch(url, { ...withTraceHeaders(init as UndiciInit), dispatcher: agent }) as unknown as Promise<Response>
  return {
    dispatcher: agent,
    fetch,
    close: () => agent.close(),
  }
}
