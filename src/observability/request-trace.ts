import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Link, type Span } from '@opentelemetry/api'
import { GatewayError, RpcError } from '../errors.ts'
import { storedTraceContext, traceparentOf, type TracedTask } from './trace-context.ts'
import type { GatewayTracing, TraceParent } from './tracing.ts'

/** The class of an error, for `error.type`: the gateway's code, the JSON-RPC code, or the error's name. */
export function errorType (err: unknown): string {
  if (err instanceof GatewayError) return err.code
  if (err instanceof RpcError) return String(err.rpcCode)
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code
    return typeof code === 'number' || typeof code === 'string' ? String(code) : err.name
  }
  return 'unknown'
}

/** Marks `span` as failed by `err`: its JSON-RPC code when it has one, its class, and the gateway's message. */
export function failSpan (span: Span, err: unknown): void {
  const code = err instanceof GatewayError || err instanceof RpcError ? err.rpcCode : (err as { code?: unknown } | null)?.code
  if (typeof code === 'number') span.setAttribute('rpc.response.status_code', String(code))
  span.setAttribute('error.type', errorType(err))
  span.setStatus({ code: SpanStatusCode.ERROR, ...(err instanceof GatewayError && { message: err.message }) })
}

/**
 * The server span of one MCP request. The span itself is made when something needs it (an upstream
 * request, a task created) or when the request ends, not on arrival: until then a request about an
 * existing task can still join that task's trace. That is what it does when its client sent no trace
 * context of its own; one that did stays in its client's trace, with a link to the task's.
 */
export class RequestTrace implements TraceParent {
  readonly tracing: GatewayTracing
  readonly #start = performance.timeOrigin + performance.now()
  readonly #attributes: Attributes
  readonly #links: Link[] = []
  #name: string
  #parent: Context | undefined
  readonly #fromClient: boolean
  #span: Span | undefined
  #context: Context | undefined
  #failed = false

  constructor (
    tracing: GatewayTracing,
    method: string,
    era: string | undefined,
    parent: Context | undefined,
    requestId: string | number | undefined,
  ) {
    this.tracing = tracing
    this.#name = method
    this.#parent = parent
    this.#fromClient = parent !== undefined
    // A request forwarded by another gateway process (no era of its own) arrives over the store, not HTTP.
    this.#attributes = era === undefined
      ? { 'mcp.method.name': method, 'gateway.forwarded': true }
      : { 'mcp.method.name': method, 'gateway.era': era }
    if (requestId !== undefined) this.#attributes['jsonrpc.request.id'] = String(requestId)
    if (method === 'tools/call') this.#attributes['gen_ai.operation.name'] = 'execute_tool'
  }

  /** The context holding the server span (made now if it was not yet). */
  get context (): Context {
    this.#context ??= trace.setSpan(ROOT_CONTEXT, this.#materialize())
    return this.#context
  }

  /** The tool or prompt (as the client named it) and the upstream that serves it. */
  target (upstream: string, tool: string | undefined): void {
    this.#set({ 'gateway.upstream': upstream })
    const key = this.#attributes['mcp.method.name'] === 'prompts/get' ? 'gen_ai.prompt.name' : 'gen_ai.tool.name'
    if (tool === undefined || this.#attributes[key] !== undefined) return
    this.#set({ [key]: tool })
    this.#name = `${String(this.#attributes['mcp.method.name'])} ${tool}`
    this.#span?.updateName(this.#name)
  }

  /**
   * The request concerns `task`: it joins the task's trace when its client sent no trace context (and the
   * span is not made yet), else it links to it.
   */
  task (task: TracedTask): void {
    this.#set({ 'gateway.task.id': task.id, 'gateway.upstream': task.upstream })
    const context = storedTraceContext(task.traceContext)
    if (context === undefined) return
    if (!this.#fromClient && this.#span === undefined) {
      this.#parent = context
      return
    }
    const linked = trace.getSpanContext(context)
    if (linked === undefined || linked.traceId === this.#spanContextTraceId()) return
    if (this.#span === undefined) this.#links.push({ context: linked })
    else this.#span.addLink({ context: linked })
  }

  /** This request created `task`: its span becomes the task's root; returns the traceparent to store with it. */
  created (task: Pick<TracedTask, 'id' | 'upstream'>, tool: string | undefined): string | null {
    this.#set({ 'gateway.task.id': task.id })
    this.target(task.upstream, tool)
    return traceparentOf(this.#materialize())
  }

  /** The request failed (a JSON-RPC error, or an HTTP error status). */
  failed (err: unknown): void {
    this.#failed = true
    failSpan(this.#materialize(), err)
  }

  /** A tools/call answered with `isError: true`. */
  toolError (): void {
    this.#set({ 'error.type': 'tool_error', 'gateway.outcome': 'tool_error' })
    this.#failed = true
    this.#materialize().setStatus({ code: SpanStatusCode.ERROR })
  }

  /** The `traceparent` that continues this request's trace (a request forwarded to another gateway process). */
  traceparent (): string | null {
    return traceparentOf(this.#materialize())
  }

  /** The response ended with HTTP status `status` (none for a request another gateway process forwarded). */
  end (status = 200, http = true): void {
    const span = this.#materialize()
    if (http) span.setAttribute('http.response.status_code', status)
    if (this.#attributes['gateway.outcome'] === undefined) {
      span.setAttribute('gateway.outcome', status === 429 ? 'refused' : status >= 400 || this.#failed ? 'error' : 'ok')
    }
    if (status >= 400 && !this.#failed) span.setStatus({ code: SpanStatusCode.ERROR })
    span.end()
  }

  #spanContextTraceId (): string | undefined {
    return this.#span?.spanContext().traceId ?? (this.#parent === undefined ? undefined : trace.getSpanContext(this.#parent)?.traceId)
  }

  #set (attributes: Attributes): void {
    Object.assign(this.#attributes, attributes)
    this.#span?.setAttributes(attributes)
  }

  #materialize (): Span {
    this.#span ??= this.tracing.tracer.startSpan(this.#name, {
      kind: SpanKind.SERVER,
      startTime: this.#start,
      attributes: this.#attributes,
      links: this.#links,
    }, this.#parent ?? ROOT_CONTEXT)
    return this.#span
  }
}
