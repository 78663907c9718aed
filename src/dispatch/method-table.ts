import type { Catalog } from '../catalog/catalog.ts'
import type { CatalogKind, Route } from '../catalog/catalog-view.ts'
import type { ResourceSubscriptions } from '../catalog/resource-subscriptions.ts'
import { requestUpstream } from '../upstream/upstream-request.ts'
import { GatewayError, RpcError } from '../errors.ts'
import type { JsonObject } from '../wire/jsonrpc.ts'
import { sessionOf, type Handler, type MethodTable, type RequestContext } from './context.ts'
import { paginate } from './pagination.ts'
import type { Upstream } from '../upstream/upstream.ts'
import { requireObject, requireString, withoutProgressToken } from '../wire/params.ts'

export interface SharedMethodDeps {
  catalog: Catalog
  subscriptions: ResourceSubscriptions
  pageSize: number
  /** The configured upstreams (a reload changes the array in place). */
  upstreams: readonly Upstream[]
}

const LOG_LEVELS = new Set(['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'])

/**
 * Forwards a read-type request to an upstream (with the name or URI the upstream knows, `rename`), on the
 * client's upstream session (with the caller's own Authorization header where it is forwarded).
 */
async function forward (
  upstream: Upstream,
  method: string,
  params: JsonObject,
  ctx: RequestContext,
  rename: JsonObject,
): Promise<JsonObject> {
  const plan = { method, client: ctx.client, purpose: 'read', signal: ctx.signal, authorization: ctx.caller.authorization, trace: ctx.trace } as const
  const forwarded = { ...withoutProgressToken(params), ...rename }
  return await requestUpstream(upstream, plan, async (request) => await request.send(method, forwarded))
}

/**
 * Sets the client's log level on its session of every upstream that offers logging and that the caller may use
 * (opening the session if needed, as the client's own session would exist without the gateway).
 */
async function setLevel (upstreams: readonly Upstream[], params: JsonObject, ctx: RequestContext): Promise<void> {
  const logging = upstreams.filter((upstream) => upstream.state === 'ready' && upstream.offered?.capabilities.logging !== undefined &&
    ctx.caller.access.upstream(upstream.name))
  await Promise.all(logging.map(async (upstream) => {
    await forward(upstream, 'logging/setLevel', params, ctx, {})
  }))
}

function lister (catalog: Catalog, kind: CatalogKind, key: string, pageSize: number): Handler {
  return async (params, ctx) => {
    const { page, nextCursor } = paginate((await catalog.view(ctx.client, ctx.caller)).list(kind, ctx.caller.access), params, pageSize)
    return nextCursor === undefined ? { [key]: page } : { [key]: page, nextCursor }
  }
}

/** The methods both revisions answer alike; each revision's registry declares which of them it has. */
export type SharedMethod = 'ping' | 'logging/setLevel' | 'tools/list' | 'prompts/list' | 'resources/list' | 'resources/templates/list' |
  'resources/read' | 'resources/subscribe' | 'resources/unsubscribe' | 'completion/complete'

export type SharedHandlers = Readonly<Record<SharedMethod, Handler>>

/**
 * The handlers of the methods both revisions answer alike. The calls (`tools/call`, `prompts/get`) are not
 * here: how an upstream's input requests reach the client differs by revision, so each revision's registry
 * declares its own (`2025-11-25/methods.ts`, `2026-07-28/methods.ts`).
 */
export function sharedMethods (deps: SharedMethodDeps): SharedHandlers {
  const { catalog, subscriptions, pageSize } = deps
  return {
    ping: async () => ({}),
    'logging/setLevel': async (params, ctx) => {
      const level = requireString(params, 'level')
      if (!LOG_LEVELS.has(level)) throw new GatewayError('GW_ERR_RPC_INVALID_PARAMS', [`'level' must be one of ${[...LOG_LEVELS].join(', ')}`])
      await setLevel(deps.upstreams, params, ctx)
      return {}
    },
    'tools/list': lister(catalog, 'tools', 'tools', pageSize),
    'prompts/list': lister(catalog, 'prompts', 'prompts', pageSize),
    'resources/list': lister(catalog, 'resources', 'resources', pageSize),
    'resources/templates/list': lister(catalog, 'resourceTemplates', 'resourceTemplates', pageSize),
    'resources/read': async (params, ctx) => {
      const uri = requireString(params, 'uri')
      const route = (await catalog.view(ctx.client, ctx.caller)).resource(uri, ctx.caller.access)
      try {
        return await forward(route.upstream, 'resources/read', params, ctx, {})
      } catch (err) {
        // A resource the upstream does not have: name it in `data`, as SEP-2164 asks, when the upstream did not.
        if (err instanceof RpcError && (err.rpcCode === -32002 || err.rpcCode === -32602) && err.data === undefined) {
          throw new RpcError(err.rpcCode, err.message, { uri })
        }
        throw err
      }
    },
    'resources/subscribe': async (params, ctx) => {
      const uri = requireString(params, 'uri')
      const route = (await catalog.view(ctx.client, ctx.caller)).resource(uri, ctx.caller.access)
      await subscriptions.subscribe(sessionOf(ctx, 'resources/subscribe'), uri, route.upstream, ctx.client, ctx.caller.authorization)
      return {}
    },
    'resources/unsubscribe': async (params, ctx) => {
      const uri = requireString(params, 'uri')
      await subscriptions.unsubscribe(sessionOf(ctx, 'resources/unsubscribe'), uri)
      return {}
    },
    'completion/complete': async (params, ctx) => {
      const ref = requireObject(params, 'ref')
      requireObject(params, 'argument')
      const view = await catalog.view(ctx.client, ctx.caller)
      if (ref.type === 'ref/prompt') {
        const route = view.prompt(requireString(ref, 'name'), ctx.caller.access)
        return await forward(route.upstream, 'completion/complete', params, ctx, { ref: { ...ref, name: route.target } })
      }
      if (ref.type === 'ref/resource') {
        const uri = requireString(ref, 'uri')
        let route: Route
        try {
          route = view.resourceTemplate(uri, ctx.caller.access)
        } catch {
          route = view.resource(uri, ctx.caller.access)
        }
        return await forward(route.upstream, 'completion/complete', params, ctx, {})
      }
      throw new GatewayError('GW_ERR_RPC_INVALID_PARAMS', ["'ref.type' must be 'ref/prompt' or 'ref/resource'"])
    },
  }
}

/** The handler of `method`; a method the table does not have is -32601, as for any server. */
export function lookupHandler (table: MethodTable, method: string): Handler {
  const handler = table.get(method)
  if (!handler) throw new GatewayError('GW_ERR_RPC_METHOD_NOT_FOUND', [method])
  return handler
}
