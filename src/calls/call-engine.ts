import type { Catalog } from '../catalog/catalog.ts'
import type { Route } from '../catalog/catalog-view.ts'
import type { RequestContext } from '../dispatch/context.ts'
import { optionalObject, requireString, withoutProgressToken } from '../wire/params.ts'
import { GatewayError } from '../errors.ts'
import type { JsonObject } from '../wire/jsonrpc.ts'
import type { CallSink, InputMethod } from '../upstream/call-attribution.ts'
import { clientSupports, type ClientRef } from '../upstream/client-ref.ts'
import type { Upstream } from '../upstream/upstream.ts'
import { mapUpstreamError } from '../upstream/upstream-errors.ts'
import { callUpstream } from './upstream-call.ts'
import { errorClass, type GatewayMetrics } from '../observability/metrics.ts'
import type { TraceParent } from '../observability/tracing.ts'

/** How one call reaches its client: input requests, progress and other notifications. */
export interface CallChannel {
  /** The client's capabilities: what may be relayed to it. */
  capabilities: JsonObject
  ask (method: InputMethod, params: JsonObject, signal: AbortSignal): Promise<JsonObject>
  /** The upstream asked for something the client did not declare (the upstream gets an error regardless). */
  refused? (capability: string, method: InputMethod): void
  progress? (progress: JsonObject): void
  notify (method: string, params: JsonObject): void
  /** The call has to wait for a free call slot of its upstream (maxConcurrentCalls). */
  queued? (): void
  /** The request is on its way upstream: it has a call slot and its session (waiting for them is over). */
  sent? (): void
  /** The caller's own Authorization header, for upstreams configured with forwardAuthorization. */
  authorization?: string | undefined
  /** The span the call is made for (tracing on): a request's server span, or a task's run span. */
  trace?: TraceParent | undefined
}

/** What a call runs: an upstream, the upstream's own name for the tool or prompt, and whether the upstream runs the tool only as a task. */
export interface CallTarget {
  upstream: Upstream
  target: string
  native: boolean
}

/** The caller's Authorization header when `upstream` is configured to receive it (forwardAuthorization); else undefined. */
export function forwardedAuthorization (upstream: Upstream, authorization: string | undefined): string | undefined {
  return upstream.forwardsAuthorization ? authorization : undefined
}

export function callTarget (route: Route): CallTarget {
  return { upstream: route.upstream, target: route.target, native: route.nativeTaskSupport === 'required' }
}

/** The channel of a legacy-era request: input, progress and notifications go live on its own stream. */
function liveChannel (ctx: RequestContext): CallChannel {
  const progressToken = ctx.progressToken
  return {
    capabilities: ctx.session.clientCapabilities,
    ask: (method, params, signal) => ctx.request(method, params, signal),
    ...(progressToken !== undefined && {
      progress: (progress: JsonObject) => ctx.notify('notifications/progress', { ...progress, progressToken }),
    }),
    notify: (method, params) => ctx.notify(method, params),
    authorization: ctx.caller.authorization,
    trace: ctx.trace,
  }
}

/**
 * Runs upstream tools/call (and prompts/get) requests, synchronous or for a task. Each call runs on its
 * client's upstream session, within its upstream's call slots; what the upstream asks during the call
 * goes to the call's channel, and progress is forwarded with the client's own token.
 */
export class CallEngine {
  readonly #catalog: Catalog
  readonly #metrics: GatewayMetrics | undefined

  constructor (catalog: Catalog, metrics?: GatewayMetrics) {
    this.#catalog = catalog
    this.#metrics = metrics
  }

  /** A legacy-era synchronous tools/call: input is relayed live on the request's stream. */
  async callTool (params: JsonObject, ctx: RequestContext): Promise<JsonObject> {
    const route = (await this.#catalog.view(ctx.client, ctx.caller)).tool(requireString(params, 'name'), ctx.caller.access)
    return await this.run(callTarget(route), ctx.client, params, liveChannel(ctx), ctx.signal)
  }

  /** A legacy-era prompts/get: an upstream that asks for input while building the prompt is answered live too. */
  async getPrompt (params: JsonObject, ctx: RequestContext): Promise<JsonObject> {
    const route = (await this.#catalog.view(ctx.client, ctx.caller)).prompt(requireString(params, 'name'), ctx.caller.access)
    return await this.run(callTarget(route), ctx.client, params, liveChannel(ctx), ctx.signal, 'prompts/get')
  }

  /** Runs one upstream request of `target` for `client` (a tools/call, or a prompts/get that may ask for input too). */
  async run (target: CallTarget, client: ClientRef, params: JsonObject, channel: CallChannel, signal: AbortSignal, method: 'tools/call' | 'prompts/get' = 'tools/call'): Promise<JsonObject> {
    optionalObject(params, 'arguments')
    const upstream = target.upstream
    const timeout = method === 'tools/call' ? upstream.config.toolSettings[target.target]?.timeout ?? upstream.config.timeouts.call : upstream.config.timeouts.request
    const sink: CallSink = {
      input: (inputMethod, inputParams, inputSignal) => {
        const missing = clientSupports(channel.capabilities, inputMethod, inputParams)
        if (missing) {
          channel.refused?.(missing, inputMethod)
          return Promise.reject(new GatewayError('GW_ERR_CLIENT_CAPABILITY_MISSING', [missing, inputMethod]))
        }
        return channel.ask(inputMethod, inputParams, AbortSignal.any([inputSignal, signal]))
      },
      notify: (notification, notificationParams) => channel.notify(notification, notificationParams),
    }
    channel.trace?.target?.(upstream.name, typeof params.name === 'string' ? params.name : undefined)
    const metrics = this.#metrics
    const started = performance.now()
    let outcome = 'ok'
    let freeSlot: (() => void) | undefined
    try {
      freeSlot = upstream.slots.tryTake()
      if (freeSlot === undefined) {
        channel.queued?.()
        const queuedAt = performance.now()
        freeSlot = await upstream.slots.take(signal)
        metrics?.queueWait(upstream.name, (performance.now() - queuedAt) / 1000)
      }
      const lease = await upstream.acquire(client, 'call', channel.authorization)
      const session = lease.session
      const call = session.calls.begin(client.key, sink)
      session.pristine = false
      try {
        channel.sent?.()
        const { requestState: _state, inputResponses: _responses, ...forwarded } = withoutProgressToken(params)
        // Every call asks for progress: its token also ties what the upstream asks during the call to it.
        const result = await callUpstream(session, call, method, { ...forwarded, name: target.target }, target.native, {
          timeout,
          signal,
          onprogress: (progress) => channel.progress?.(progress),
          authorization: forwardedAuthorization(upstream, channel.authorization),
          trace: channel.trace,
        })
        if (result.isError === true) outcome = 'tool_error'
        return result
      } finally {
        session.calls.end(call)
        lease.release()
      }
    } catch (err) {
      // An upstream a reload took away fails its last calls with that reason, not as a lost connection.
      const mapped = (signal.aborted ? undefined : upstream.closedBy) ?? mapUpstreamError(err, upstream.name, `${method} '${target.target}'`, timeout, signal)
      if (metrics !== undefined) {
        outcome = errorClass(mapped)
        metrics.upstreamFailed(upstream.name, mapped)
      }
      throw mapped
    } finally {
      freeSlot?.()
      // The tool name comes from the upstream's catalog (the route), never from the client: a bounded label.
      if (method === 'tools/call') metrics?.upstreamCall(upstream.name, target.target, outcome, (performance.now() - started) / 1000)
    }
  }
}
