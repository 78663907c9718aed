import { Agent, Headers as UndiciHeaders, fetch as undiciFetch, type Dispatcher } from 'undici'
import type { FetchLike } from '@modelcontextprotocol/client'
import type { HttpUpstreamConfig } from '../config/schema.ts'
import { UpstreamHttpError } from '../errors.ts'
import { traceHeadersOf } from '../observability/trace-context.ts'

/** How much of an upstream's error body is kept for the log. */
const BODY_EXCERPT_CHARS = 1000

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

/** Whole seconds from a Retry-After value (seconds, or an HTTP date); undefined when there is none or it is not one. */
export function parseRetryAfter (value: string | string[] | null | undefined, now = Date.now()): number | undefined {
  const text = (Array.isArray(value) ? value[0] : value)?.trim()
  if (text === undefined || text === '') return undefined
  if (/^\d+$/.test(text)) return Number(text)
  // An HTTP date names its day and month; Date.parse alone would take '-5' for a year.
  const date = /[a-z]/i.test(text) ? Date.parse(text) : Number.NaN
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - now) / 1000))
}

/** The error of an upstream's HTTP answer outside 2xx: its status, its Retry-After, and the start of its body (for the log only). */
export function upstreamHttpError (status: number, retryAfter: string | string[] | null | undefined, body: string): UpstreamHttpError {
  return new UpstreamHttpError(status, body.slice(0, BODY_EXCERPT_CHARS), parseRetryAfter(retryAfter))
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
    keepAliveTimeout: config.keepAliveTimeout,
    connectTimeout: config.timeouts.connect,
    headersTimeout: 0,
    bodyTimeout: 0,
  })
  // The SSE transport would put the body of an HTTP error on a POST into its error's message, and so in front
  // of the client: such an answer fails the POST here instead, with the status only.
  const fetch: FetchLike = async (url, init) => {
    const response = await undiciFetch(url, { ...withTraceHeaders(init as UndiciInit), dispatcher: agent })
    if (init?.method === 'POST' && response.status >= 400) {
      throw upstreamHttpError(response.status, response.headers.get('retry-after'), await response.text().catch(() => ''))
    }
    return response as unknown as Response
  }
  return {
    dispatcher: agent,
    fetch,
    close: () => agent.close(),
  }
}
