import { errorMessage } from '../errors.ts'
import type { Logger } from '../observability/logger.ts'
import type { RpcNotification } from '../protocol/jsonrpc.ts'
import type { UpstreamPool, UpstreamPoolEvents } from '../upstream/upstream-pool.ts'
import { describeCollisions, type Catalog, type Collision } from './catalog.ts'
import type { ResourceSubscriptions } from './resource-subscriptions.ts'

export interface CatalogSyncTargets {
  catalog: Catalog
  subscriptions: ResourceSubscriptions
  log: Logger
  /** Sends a notification to every connected session. */
  broadcast (message: RpcNotification): void
  /** Sends a notification to one session. */
  sendTo (sessionId: string, message: RpcNotification): void
}

const LIST_CHANGED = {
  tools: 'notifications/tools/list_changed',
  prompts: 'notifications/prompts/list_changed',
  resources: 'notifications/resources/list_changed',
} as const

function notification (method: string): RpcNotification {
  return { jsonrpc: '2.0', method }
}

/**
 * Keeps the catalog in step with the upstreams: an upstream that comes up or reports a list change is
 * re-read, one that goes down drops out; clients are told with list_changed notifications. Collisions
 * found after start are logged and the later upstream's entry stays hidden.
 */
export function catalogSync (targets: CatalogSyncTargets): UpstreamPoolEvents & { started (): void } {
  const { catalog, subscriptions, log } = targets
  let started = false

  const reportCollisions = (collisions: readonly Collision[]): void => {
    if (started && collisions.length > 0) log.error({ collisions }, describeCollisions(collisions))
  }
  const broadcastAll = (): void => {
    if (!started) return
    for (const method of Object.values(LIST_CHANGED)) targets.broadcast(notification(method))
  }
  const refresh = async (pool: UpstreamPool): Promise<boolean> => {
    try {
      reportCollisions(await catalog.refresh(pool))
      return true
    } catch (err) {
      log.warn({ upstream: pool.name, err: errorMessage(err) }, 'could not read upstream lists')
      return false
    }
  }

  return {
    started: () => { started = true },
    onReady: (pool) => {
      if (!started) return
      void refresh(pool).then(async (ok) => {
        if (!ok) return
        broadcastAll()
        await subscriptions.renew(pool)
      })
    },
    onDown: () => {
      reportCollisions(catalog.rebuild())
      broadcastAll()
    },
    onListChanged: (pool, kind) => {
      void refresh(pool).then((ok) => {
        if (ok && started) targets.broadcast(notification(LIST_CHANGED[kind]))
      })
    },
    onResourceUpdated: (pool, params) => {
      const uri = typeof params.uri === 'string' ? params.uri : undefined
      if (uri === undefined) return
      for (const sessionId of subscriptions.sessionsFor(pool, uri)) {
        targets.sendTo(sessionId, { jsonrpc: '2.0', method: 'notifications/resources/updated', params })
      }
    },
  }
}
