import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type Tracer } from '@opentelemetry/api'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { resourceFromAttributes } from '@opentelemetry/resources'
import { BatchSpanProcessor, NodeTracerProvider, ParentBasedSampler, TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace-node'
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions'
import type { IncomingHttpHeaders } from 'node:http'
import type { TracingConfig, UpstreamConfig } from '../config/schema.ts'
import { answeredId, type ClassifiedMessage } from '../wire/classified-message.ts'
import type { JsonObject } from '../wire/jsonrpc.ts'
import type { TaskStatus } from '../wire/task-state.ts'
import { GATEWAY_INFO } from '../wire/versions.ts'
import { failSpan, RequestTrace } from './request-trace.ts'
import { carrierOf, clientTraceContext, storedTraceContext, type TraceCarrier, type TracedTask } from './trace-context.ts'

/** Where spans of upstream requests hang: a client request's server span, or a task's run span. */
export interface TraceParent {
  readonly tracing: GatewayTracing
  /** The context holding the parent span. */
  readonly context: Context
  /** Names the upstream (and tool) the request it stands for goes to. */
  target? (upstream: string, tool: string | undefined): void
}

/** The span of one request sent to an upstream, and the W3C entries that continue it there. */
export interface UpstreamSpan {
  readonly span: Span
  readonly carrier: TraceCarrier
}

/**
 * The gateway's traces: one tracer provider per gateway (several gateways in one process keep theirs apart;
 * nothing is registered globally), its spans batched and exported over OTLP/HTTP (JSON). Only built when
 * `tracing.enabled`: with tracing off the gateway holds none, and no span object is ever made.
 *
 * Spans carry no tool arguments, results, tokens, principals or session ids: methods, tool and upstream
 * names, task ids, statuses and error codes only.
 */
export class GatewayTracing {
  readonly #provider: NodeTracerProvider
  readonly #addresses = new WeakMap<UpstreamConfig, Attributes>()
  readonly tracer: Tracer

  constructor (config: TracingConfig, processId: string) {
    const exporter = new OTLPTraceExporter({ url: config.endpoint, headers: { ...config.headers }, timeoutMillis: config.exportTimeout })
    this.#provider = new NodeTracerProvider({
      resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: config.serviceName, [ATTR_SERVICE_VERSION]: GATEWAY_INFO.version, 'service.instance.id': processId }),
      sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(config.sampleRatio) }),
      spanProcessors: [new BatchSpanProcessor(exporter, {
        maxQueueSize: config.maxQueueSize,
        maxExportBatchSize: config.maxBatchSize,
        scheduledDelayMillis: config.batchDelay,
        exportTimeoutMillis: config.exportTimeout,
      })],
    })
    this.tracer = this.#provider.getTracer(GATEWAY_INFO.name, GATEWAY_INFO.version)
  }

  /**
   * The server span of one POSTed MCP request named `name`, continuing the trace context its client sent,
   * if any; undefined for what runs nothing (a notification or a response the client posts). A body refused
   * as invalid is traced when it names a request id: its refusal answers that request.
   */
  request (message: ClassifiedMessage, name: string, headers: IncomingHttpHeaders): RequestTrace | undefined {
    const id = answeredId(message)
    if (id === null) return undefined
    const meta = message.kind === 'request' ? message.message.params?._meta : undefined
    return new RequestTrace(this, name, message.era, clientTraceContext(headers, meta), id)
  }

  /**
   * The span of a request another gateway process forwarded to this one (the client's home), continuing
   * the forwarding request's span (`traceparent`).
   */
  forwarded (method: string, traceparent: string | null, requestId: string | number): RequestTrace {
    return new RequestTrace(this, method, undefined, storedTraceContext(traceparent), requestId)
  }

  /** Starts the client span of a request to an upstream, child of `parent`. */
  upstream (parent: TraceParent, config: UpstreamConfig, method: string, params: JsonObject | undefined): UpstreamSpan {
    const tool = method === 'tools/call' || method === 'prompts/get' ? params?.name : undefined
    const attributes: Attributes = {
      'mcp.method.name': method,
      'gateway.upstream': config.name,
      'gateway.upstream.transport': config.transport,
      'network.transport': config.transport === 'stdio' ? 'pipe' : 'tcp',
    }
    if (typeof tool === 'string') attributes[method === 'tools/call' ? 'gen_ai.tool.name' : 'gen_ai.prompt.name'] = tool
    if (config.transport !== 'stdio') Object.assign(attributes, this.#addressOf(config))
    const span = this.tracer.startSpan(typeof tool === 'string' ? `${method} ${tool}` : method, { kind: SpanKind.CLIENT, attributes }, parent.context)
    return { span, carrier: carrierOf(span) }
  }

  /** `server.address` and `server.port` of an HTTP upstream, from its URL (read once per upstream). */
  #addressOf (config: Exclude<UpstreamConfig, { transport: 'stdio' }>): Attributes {
    let address = this.#addresses.get(config)
    if (address === undefined) {
      const url = new URL(config.url)
      address = { 'server.address': url.hostname, 'server.port': Number(url.port || (url.protocol === 'https:' ? 443 : 80)) }
      this.#addresses.set(config, address)
    }
    return address
  }

  /** Ends an upstream request's span with its outcome (`result`, or `err` when it failed). */
  upstreamEnded (span: Span, result: JsonObject | undefined, err?: unknown): void {
    if (result === undefined) failSpan(span, err)
    else if (result.isError === true) span.setAttributes({ 'error.type': 'tool_error', 'gateway.outcome': 'tool_error' }).setStatus({ code: SpanStatusCode.ERROR })
    else if (result.resultType === 'input_required') span.setAttribute('gateway.outcome', 'input_required')
    span.end()
  }

  /** The span of one run of a task on this process: a child of the span that created the task. */
  taskRun (task: TracedTask): TaskRunTrace {
    const span = this.tracer.startSpan('task run', {
      kind: SpanKind.INTERNAL,
      attributes: { 'gateway.task.id': task.id, 'gateway.upstream': task.upstream, 'gen_ai.tool.name': task.tool, 'gateway.era': task.era },
    }, storedTraceContext(task.traceContext) ?? ROOT_CONTEXT)
    return new TaskRunTrace(this, span)
  }

  /** Sends the spans still waiting and stops exporting. */
  async close (): Promise<void> {
    await this.#provider.shutdown()
  }
}

/** A task's run on this process; its input rounds are spans under it, and it ends with the task's status. */
export class TaskRunTrace implements TraceParent {
  readonly tracing: GatewayTracing
  readonly context: Context
  readonly #span: Span

  constructor (tracing: GatewayTracing, span: Span) {
    this.tracing = tracing
    this.#span = span
    this.context = trace.setSpan(ROOT_CONTEXT, span)
  }

  /** One input round: from the upstream asking until the client's answer (or the request's end). */
  async inputRound<T> (method: string, wait: () => Promise<T>): Promise<T> {
    const span = this.tracing.tracer.startSpan(`task input ${method}`, { kind: SpanKind.INTERNAL, attributes: { 'mcp.method.name': method } }, this.context)
    try {
      const answer = await wait()
      span.setAttribute('gateway.outcome', 'answered')
      return answer
    } catch (err) {
      failSpan(span, err)
      throw err
    } finally {
      span.end()
    }
  }

  /** The run ended: the task's status now (`undefined` when the run stopped without storing an outcome). */
  end (status: TaskStatus | undefined, error?: unknown): void {
    if (status !== undefined) this.#span.setAttribute('gateway.task.status', status)
    if (error !== undefined) failSpan(this.#span, error)
    this.#span.end()
  }
}
