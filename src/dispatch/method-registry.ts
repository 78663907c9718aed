import { offersCapability, type OptionalCapability, type ServerFeatures } from '../catalog/server-profile.ts'
import { GatewayError } from '../errors.ts'
import type { JsonObject } from '../wire/jsonrpc.ts'
import type { Handler, MethodTable, RequestContext } from './context.ts'

/** One method of a protocol revision, as its registry declares it. */
export interface MethodSpec {
  readonly handler: Handler
  /**
   * Whether the method uses the client's upstream sessions. Then it runs on the client's home process, the one
   * holding those sessions, when several processes share a store (`cluster/home-routing.ts`).
   */
  readonly home: boolean
  /** The optional server capability the method belongs to: -32601 while no upstream offers it. */
  readonly capability?: OptionalCapability | undefined
  /** Whether the result carries the revision's caching hints (`MethodRegistry.cacheHints`). */
  readonly listCache?: boolean | undefined
}

/**
 * Every method a protocol revision answers, declared in one place (`2025-11-25/methods.ts` for 2025-11-25,
 * `2026-07-28/methods.ts` for 2026-07-28). A method it does not declare is -32601.
 */
export interface MethodRegistry {
  readonly methods: Readonly<Record<string, MethodSpec>>
  /** What the result of a `listCache` method adds for the client's cache (2026-07-28: `ttlMs`, `cacheScope`). */
  readonly cacheHints?: ((ctx: RequestContext) => JsonObject) | undefined
}

/** The methods of `registry` that run on the client's home process. */
export function homeMethods (registry: MethodRegistry): string[] {
  return Object.entries(registry.methods).filter(([, spec]) => spec.home).map(([method]) => method)
}

/**
 * The table a revision's endpoint looks methods up in: each handler with what its declaration asks for, the
 * caching hints on its result and the -32601 of a capability no upstream offers now (`features`, which a
 * reload changes). Where a method runs (home routing) is added around this table, so a request forwarded to
 * the client's home is checked there.
 */
export function methodTable (registry: MethodRegistry, features: () => Promise<ServerFeatures>): MethodTable {
  const table = new Map<string, Handler>()
  for (const [method, spec] of Object.entries(registry.methods)) {
    let handler = spec.handler
    const hints = registry.cacheHints
    if (spec.listCache === true && hints !== undefined) handler = withHints(handler, hints)
    if (spec.capability !== undefined) handler = offeredOnly(handler, method, spec.capability, features)
    table.set(method, handler)
  }
  return table
}

function withHints (handler: Handler, hints: (ctx: RequestContext) => JsonObject): Handler {
  return async (params, ctx) => ({ ...await handler(params, ctx), ...hints(ctx) })
}

function offeredOnly (handler: Handler, method: string, capability: OptionalCapability, features: () => Promise<ServerFeatures>): Handler {
  return async (params, ctx) => {
    if (!offersCapability(await features(), capability)) throw new GatewayError('GW_ERR_RPC_METHOD_NOT_FOUND', [method])
    return await handler(params, ctx)
  }
}
