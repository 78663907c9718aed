import type { Catalog } from '../../catalog/catalog.ts'
import type { ServerProfile } from '../../catalog/server-profile.ts'
import type { Handler } from '../../dispatch/context.ts'
import type { MethodRegistry } from '../../dispatch/method-registry.ts'
import type { SharedHandlers } from '../../dispatch/method-table.ts'
import { GATEWAY_INFO } from '../../wire/versions.ts'
import { MODERN_PROTOCOL_VERSIONS, SERVER_INFO_KEY, TASKS_EXTENSION } from './envelope.ts'
import { listenMethod, type ListenDeps } from './listen-method.ts'
import { modernTaskMethods, type ModernTaskMethodDeps } from './task-methods.ts'

export interface ModernMethodDeps extends ModernTaskMethodDeps, ListenDeps {
  /** The handlers both revisions share (`dispatch/method-table.ts`). */
  shared: SharedHandlers
  catalog: Catalog
  toolsCall: Handler
  promptsGet: Handler
  /** How long clients may cache list results (the 2026-07-28 caching hints). */
  listTtlMs: number
  /** What server/discover announces: the upstreams' capabilities and instructions (see ServerProfile). */
  profile (): Promise<ServerProfile>
}

/**
 * Every method of the 2026-07-28 revision, with the tasks extension. `home`: the method uses the client's
 * upstream sessions, so it runs on the client's home process; `capability`: the optional server capability it
 * belongs to (-32601 while no upstream offers it); `listCache`: its result carries the caching hints. The
 * 2025-era methods this revision no longer has (`ping`, `logging/setLevel`, `resources/subscribe` and
 * `resources/unsubscribe`, which `subscriptions/listen` replaces) are not declared: HTTP 404 with -32601.
 */
export function modernMethods (deps: ModernMethodDeps): MethodRegistry {
  const { shared } = deps
  const tasks = modernTaskMethods(deps)
  return {
    methods: {
      'server/discover': { home: false, handler: discover(deps) },
      'tools/list': { home: true, listCache: true, handler: shared['tools/list'] },
      'tools/call': { home: true, handler: deps.toolsCall },
      'prompts/list': { home: true, capability: 'prompts', listCache: true, handler: shared['prompts/list'] },
      'prompts/get': { home: true, capability: 'prompts', handler: deps.promptsGet },
      'resources/list': { home: true, capability: 'resources', listCache: true, handler: shared['resources/list'] },
      'resources/templates/list': { home: true, capability: 'resources', listCache: true, handler: shared['resources/templates/list'] },
      'resources/read': { home: true, capability: 'resources', listCache: true, handler: shared['resources/read'] },
      'completion/complete': { home: true, capability: 'completions', handler: shared['completion/complete'] },
      // Its resource subscriptions are made on the client's upstream sessions.
      'subscriptions/listen': { home: true, handler: listenMethod(deps) },
      // Tasks live in the store, which every process reads: they run wherever the request arrives.
      'tasks/get': { home: false, handler: tasks['tasks/get'] },
      'tasks/update': { home: false, handler: tasks['tasks/update'] },
      'tasks/cancel': { home: false, handler: tasks['tasks/cancel'] },
    },
    // What a caller sees depends on its grants when auth.permissions is set, and on its capabilities and the
    // state of its own upstream sessions: then no cache may share it.
    cacheHints: (ctx) => ({
      ttlMs: deps.listTtlMs,
      cacheScope: ctx.caller.access.all && deps.catalog.isCommon(ctx.client, ctx.caller.authorization) ? 'public' : 'private',
    }),
  }
}

function discover (deps: ModernMethodDeps): Handler {
  return async () => {
    const { capabilities, instructions } = await deps.profile()
    return {
      supportedVersions: [...MODERN_PROTOCOL_VERSIONS],
      // The upstreams' capabilities, and the gateway's own tasks extension.
      capabilities: { ...capabilities, extensions: { [TASKS_EXTENSION]: {} } },
      ...(instructions !== undefined && { instructions }),
      ttlMs: deps.listTtlMs,
      cacheScope: 'public',
      _meta: { [SERVER_INFO_KEY]: GATEWAY_INFO },
    }
  }
}
