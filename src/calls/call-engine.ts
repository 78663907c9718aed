import type { Catalog, Route } from '../catalog/catalog.ts'
import type { RequestContext } from '../dispatch/context.ts'
import { optionalObject, requireString, withoutProgressToken } from '../dispatch/params.ts'
import { GatewayError } from '../errors.ts'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import { mirrorCapabilities, type CallSink, type InputMethod } from '../upstream/upstream-connection.ts'
import type { UpstreamPool } from '../upstream/upstream-pool.ts'
import { mapUpstreamError } from './upstream-errors.ts'
import { callUpstreamTool } from './upstream-call.ts'

/** The client capability an input request needs, and whether the client declared it. */
export function clientSupports (capabilities: JsonObject, method: InputMethod, params: JsonObject): string | undefined {
  if (method === 'sampling/createMessage') return capabilities.sampling ? undefined : 'sampling'
  if (method === 'roots/list') return capabilities.roots ? undefined : 'roots'
  const elicitation = capabilities.elicitation as JsonObject | undefined
  if (!elicitation) return 'elicitation'
  const mode = params.mode === 'url' ? 'url' : 'form'
  // An empty elicitation capability means form mode only (2025-06-18 clients).
  const declared = Object.keys(elicitation).length === 0 ? ['form'] : Object.keys(elicitation)
  return declared.includes(mode) ? undefined : `elicitation.${mode}`
}

/** How one call reaches its client: input requests, progress and other notifications. */
export interface CallChannel {
  /** The client's capabilities: what may be relayed to it. */
  capabilities: JsonObject
  ask (method: InputMethod, params: JsonObject, signal: AbortSignal): Promise<JsonObject>
  /** The upstream asked for something the client did not declare (the upstream gets an error regardless). */
  refused? (capability: string, method: InputMethod): void
  progress? (progress: JsonObject): void
  notify (method: string, params: JsonObject): void
  /** The request is on its way upstream: a connection was leased (time spent waiting for one is over). */
  sent? (): void
  /** The caller's own Authorization header, for upstreams configured with forwardAuthorization. */
  authorization?: string | undefined
}

/** The caller's Authorization header when `pool` is configured to receive it (forwardAuthorization); else undefined. */
export function forwardedAuthorization (pool: UpstreamPool, authorization: string | undefined): string | undefined {
  return pool.config.transport === 'streamable-http' && pool.config.forwardAuthorization ? authorization : undefined
}

/**
 * Runs upstream tools/call requests. Each call holds an exclusive upstream connection for its whole
 * life, so every elicitation, sampling or roots request that arrives on it belongs to this call and goes
 * to this call's client; progress is forwarded with the client's own token.
 */
export class CallEngine {
  readonly #catalog: Catalog

  constructor (catalog: Catalog) {
    this.#catalog = catalog
  }

  /** A legacy-era synchronous call: input is relayed live on the request's stream. */
  async callTool (params: JsonObject, ctx: RequestContext): Promise<JsonObject> {
    const route = this.#catalog.tool(requireString(params, 'name'), ctx.caller.access)
    const progressToken = ctx.progressToken
    return await this.run(route, params, {
      capabilities: ctx.session.clientCapabilities,
      ask: (method, inputParams, signal) => ctx.request(method, inputParams, signal),
      ...(progressToken !== undefined && {
        progress: (progress: JsonObject) => ctx.notify('notifications/progress', { ...progress, progressToken }),
      }),
      notify: (method, notificationParams) => ctx.notify(method, notificationParams),
      authorization: ctx.caller.authorization,
    }, ctx.signal)
  }

  /**
   * Runs one upstream request of `route` (a tools/call, or a prompts/get that may ask for input too) on a
   * leased connection; what the upstream asks goes to `channel`.
   */
  async run (route: Route, params: JsonObject, channel: CallChannel, signal: AbortSignal, method: 'tools/call' | 'prompts/get' = 'tools/call'): Promise<JsonObject> {
    optionalObject(params, 'arguments')
    const pool = route.pool
    const timeout = method === 'tools/call' ? pool.config.toolSettings[route.target]?.timeout ?? pool.config.timeouts.call : pool.config.timeouts.request
    const lease = await pool.lease(mirrorCapabilities(channel.capabilities), signal, forwardedAuthorization(pool, channel.authorization))
    const sink: CallSink = {
      input: (method, inputParams, inputSignal) => {
        const missing = clientSupports(channel.capabilities, method, inputParams)
        if (missing) {
          channel.refused?.(missing, method)
          return Promise.reject(new GatewayError('GW_ERR_CLIENT_CAPABILITY_MISSING', [missing, method]))
        }
        return channel.ask(method, inputParams, AbortSignal.any([inputSignal, signal]))
      },
      notify: (method, notificationParams) => channel.notify(method, notificationParams),
    }
    lease.connection.bind(sink)
    channel.sent?.()
    const progress = channel.progress
    try {
      const { requestState: _state, inputResponses: _responses, ...forwarded } = withoutProgressToken(params)
      const options = { timeout, signal, ...(progress && { onprogress: (p: unknown) => progress(p as JsonObject) }) }
      if (method === 'prompts/get') return await lease.connection.request(method, { ...forwarded, name: route.target }, options)
      return await callUpstreamTool(lease.connection, { ...forwarded, name: route.target }, route.nativeTaskSupport === 'required', options)
    } catch (err) {
      throw mapUpstreamError(err, pool.name, `${method} '${route.target}'`, timeout, signal)
    } finally {
      lease.release()
    }
  }
}
