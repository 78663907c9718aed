import type { Catalog } from '../catalog/catalog.ts'
import type { RequestContext } from '../dispatch/context.ts'
import { optionalObject, requireString, withoutProgressToken } from '../dispatch/params.ts'
import { GatewayError } from '../errors.ts'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import { mirrorCapabilities, type CallSink, type InputMethod } from '../upstream/upstream-connection.ts'
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

/**
 * Runs upstream tools/call requests. Each call holds an exclusive upstream connection for its whole
 * life, so every elicitation, sampling or roots request that arrives on it belongs to this call and is
 * relayed to this call's client; progress is forwarded with the client's own token.
 */
export class CallEngine {
  readonly #catalog: Catalog

  constructor (catalog: Catalog) {
    this.#catalog = catalog
  }

  async callTool (params: JsonObject, ctx: RequestContext): Promise<JsonObject> {
    const name = requireString(params, 'name')
    optionalObject(params, 'arguments')
    const route = this.#catalog.tool(name)
    const pool = route.pool
    const timeout = pool.config.toolSettings[route.target]?.timeout ?? pool.config.timeouts.call
    const capabilities = ctx.session.clientCapabilities
    const lease = await pool.lease(mirrorCapabilities(capabilities), ctx.signal)
    const sink: CallSink = {
      input: (method, inputParams, signal) => {
        const missing = clientSupports(capabilities, method, inputParams)
        if (missing) return Promise.reject(new GatewayError('GW_ERR_CLIENT_CAPABILITY_MISSING', [missing, method]))
        return ctx.request(method, inputParams, AbortSignal.any([signal, ctx.signal]))
      },
      notify: (method, notificationParams) => ctx.notify(method, notificationParams),
    }
    lease.connection.bind(sink)
    const progressToken = ctx.progressToken
    try {
      return await callUpstreamTool(lease.connection, { ...withoutProgressToken(params), name: route.target }, route.nativeTaskSupport === 'required', {
        timeout,
        signal: ctx.signal,
        ...(progressToken !== undefined && {
          onprogress: (progress) => ctx.notify('notifications/progress', { ...progress, progressToken }),
        }),
      })
    } catch (err) {
      throw mapUpstreamError(err, pool.name, `tools/call '${route.target}'`, timeout, ctx.signal)
    } finally {
      lease.release()
    }
  }
}
