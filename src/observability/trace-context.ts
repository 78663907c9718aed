import type { IncomingHttpHeaders } from 'node:http'
import { ROOT_CONTEXT, defaultTextMapGetter, defaultTextMapSetter, trace, type Context, type Span } from '@opentelemetry/api'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import type { JsonObject } from '../wire/jsonrpc.ts'

/** What a span reads of a task (a stored `TaskRecord` is one). */
export interface TracedTask {
  readonly id: string
  readonly upstream: string
  readonly tool: string
  readonly era: string
  /** The W3C trace context stored with the task, or null. */
  readonly traceContext: string | null
}

/**
 * W3C trace context as MCP carries it: the `traceparent` and `tracestate` HTTP headers, and the same keys in
 * a request's `params._meta` (the MCP convention, SEP-414, which every transport carries, stdio too).
 */
const propagator = new W3CTraceContextPropagator()

/** The W3C trace context entries, as headers or `_meta` keys. */
export interface TraceCarrier {
  traceparent?: string
  tracestate?: string
}

function isObject (value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** The context `carrier` names, or undefined when it holds no valid `traceparent`. */
function extracted (carrier: Record<string, unknown>): Context | undefined {
  const context = propagator.extract(ROOT_CONTEXT, carrier, defaultTextMapGetter)
  return trace.getSpanContext(context) === undefined ? undefined : context
}

/**
 * The trace context a client sent with a request: `traceparent` (and `tracestate`) in its `params._meta`
 * (`meta`) when valid, else the `traceparent` (and `tracestate`) headers; undefined when it sent none that is valid.
 */
export function clientTraceContext (headers: IncomingHttpHeaders, meta: unknown): Context | undefined {
  if (isObject(meta) && typeof meta.traceparent === 'string') {
    const fromMeta = extracted(meta)
    if (fromMeta !== undefined) return fromMeta
  }
  return headers.traceparent === undefined ? undefined : extracted(headers)
}

/** The context of a stored `traceparent` (a task's), or undefined when there is none or it is not valid. */
export function storedTraceContext (traceparent: string | null): Context | undefined {
  return traceparent === null ? undefined : extracted({ traceparent })
}

/** The W3C entries that continue the trace of `span`. */
export function carrierOf (span: Span): TraceCarrier {
  const carrier: TraceCarrier = {}
  propagator.inject(trace.setSpan(ROOT_CONTEXT, span), carrier, defaultTextMapSetter)
  return carrier
}

/** The `traceparent` of `span`, as stored with a task. */
export function traceparentOf (span: Span): string | null {
  return carrierOf(span).traceparent ?? null
}

/**
 * `params` with the W3C entries of `carrier` in its `_meta` instead of any the client sent (an upstream
 * continues the gateway's span, not the client's); the rest of `_meta` is kept.
 */
export function withTraceMeta (params: JsonObject | undefined, carrier: TraceCarrier): JsonObject {
  const meta = isObject(params?._meta) ? params._meta as JsonObject : {}
  const { traceparent: _parent, tracestate: _state, ...rest } = meta
  return { ...params, _meta: { ...rest, ...carrier } }
}

/**
 * The W3C entries in the `params._meta` of a JSON-RPC message written as `body`, for a transport that
 * cannot set headers per message (legacy HTTP+SSE POSTs); undefined when it names no trace context.
 */
export function traceHeadersOf (body: string): TraceCarrier | undefined {
  // Most messages carry none: look before parsing.
  if (!body.includes('"traceparent"')) return undefined
  let meta: unknown
  try {
    meta = (JSON.parse(body) as { params?: { _meta?: unknown } }).params?._meta
  } catch {
    return undefined
  }
  if (!isObject(meta) || typeof meta.traceparent !== 'string') return undefined
  return typeof meta.tracestate === 'string' ? { traceparent: meta.traceparent, tracestate: meta.tracestate } : { traceparent: meta.traceparent }
}
