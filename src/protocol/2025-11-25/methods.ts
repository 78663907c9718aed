import type { MethodRegistry } from '../../dispatch/method-registry.ts'
import type { SharedHandlers } from '../../dispatch/method-table.ts'
import { legacyTaskMethods, type LegacyTaskMethodDeps } from './task-methods.ts'

export interface LegacyMethodDeps extends LegacyTaskMethodDeps {
  /** The handlers both revisions share (`dispatch/method-table.ts`). */
  shared: SharedHandlers
}

/**
 * Every method of the 2025-11-25 revision but `initialize`, which opens the session the others need and is
 * answered by `LegacyEndpoint` itself. `home`: the method uses the client's upstream sessions, so it runs on
 * the client's home process; `capability`: the optional server capability it belongs to (-32601 while no
 * upstream offers it). The 2025-11-25 revision has no caching hints.
 */
export function legacyMethods (deps: LegacyMethodDeps): MethodRegistry {
  const { shared } = deps
  const own = legacyTaskMethods(deps)
  return {
    methods: {
      ping: { home: false, handler: shared.ping },
      'logging/setLevel': { home: false, capability: 'logging', handler: shared['logging/setLevel'] },
      'tools/list': { home: true, handler: shared['tools/list'] },
      'tools/call': { home: true, handler: own['tools/call'] },
      'prompts/list': { home: true, capability: 'prompts', handler: shared['prompts/list'] },
      'prompts/get': { home: true, capability: 'prompts', handler: own['prompts/get'] },
      'resources/list': { home: true, capability: 'resources', handler: shared['resources/list'] },
      'resources/templates/list': { home: true, capability: 'resources', handler: shared['resources/templates/list'] },
      'resources/read': { home: true, capability: 'resources', handler: shared['resources/read'] },
      'resources/subscribe': { home: true, capability: 'subscriptions', handler: shared['resources/subscribe'] },
      'resources/unsubscribe': { home: true, capability: 'subscriptions', handler: shared['resources/unsubscribe'] },
      'completion/complete': { home: true, capability: 'completions', handler: shared['completion/complete'] },
      // Tasks live in the store, which every process reads: they run wherever the request arrives.
      'tasks/get': { home: false, handler: own['tasks/get'] },
      'tasks/result': { home: false, handler: own['tasks/result'] },
      'tasks/list': { home: false, handler: own['tasks/list'] },
      'tasks/cancel': { home: false, handler: own['tasks/cancel'] },
    },
  }
}
