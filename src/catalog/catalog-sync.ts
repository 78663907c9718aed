import { errorMessage, GatewayError } from '../errors.ts'
import type { Logger } from '../observability/logger.ts'
import type { JsonObject, RpcNotification } from '../wire/jsonrpc.ts'
import type { InputMethod } from '../upstream/call-attribution.ts'
import { clientSupports } from '../upstream/client-ref.ts'
import type { UpstreamEvents } from '../upstream/upstream-events.ts'
import type { Catalog, CatalogChange, ListChange } from './catalog.ts'
import type { ResourceSubscriptions } from './resource-subscriptions.ts'

export interface CatalogSyncTargets {
  catalog: () => Catalog
  subscriptions: ResourceSubscriptions
  log: Logger
  /** Tells every client that one of its lists changed: on this gateway process, or on every one (`everywhere`). */
  broadcast (message: RpcNotification, everywhere: boolean): void
  /** Sends a notification to one client (by its ClientRef key). */
  notifyClient (clientKey: string, message: RpcNotification): void
  /** Asks one client something outside any call (rejects when the client cannot be asked). */
  askClient (clientKey: string, method: InputMethod, params: JsonObject, signal: AbortSignal): Promise<JsonObject>
}

const LIST_CHANGED: Record<ListChange, string> = {
  tools: 'notifications/tools/list_changed',
  prompts: 'notifications/prompts/list_changed',
  resources: 'notifications/resources/list_changed',
}

function notification (method: string): RpcNotification {
  return { jsonrpc: '2.0', method }
}

/**
 * Keeps the catalog and the clients in step with the upstreams: an upstream that comes up is re-read and
 * one that goes down drops out (every client is told); a session's list change is re-read, and told to
 * the client it serves (to every client when it changed what new sessions list); resource updates go to
 * the subscribers; what a client's session asks or says outside any call goes to that client.
 */
export function catalogSync (
  targets: CatalogSyncTargets,
): UpstreamEvents & { started (): void, changed (change: CatalogChange): void, listsChanged (): void } {
  const { subscriptions, log } = targets
  let started = false
  const broadcastAll = (): void => {
    if (!started) return
    // Every gateway process sees an upstream come and go by itself.
    for (const method of Object.values(LIST_CHANGED)) targets.broadcast(notification(method), false)
  }

  return {
    started: () => { started = true },
    /** The upstreams themselves changed (a reload): every client of this process is told of every kind. */
    listsChanged: broadcastAll,
    changed: (change) => {
      if (!started) return
      const messages = change.kinds.map((kind) => notification(LIST_CHANGED[kind]))
      if (!change.template && change.upstream.config.sessions === 'per-client') {
        for (const message of messages) targets.notifyClient(change.session.key, message)
      } else {
        for (const message of messages) targets.broadcast(message, true)
      }
    },
    onReady: (upstream) => {
      if (!started) return
      void targets.catalog().upstreamReady(upstream).then(async () => {
        broadcastAll()
        await subscriptions.renew(upstream)
      }, (err: unknown) => log.warn({ upstream: upstream.name, err: errorMessage(err) }, 'could not read upstream lists'))
    },
    onDown: () => {
      targets.catalog().upstreamDown()
      broadcastAll()
    },
    onListChanged: (upstream, session, kind) => targets.catalog().listChanged(upstream, session, kind),
    onResourceUpdated: (_upstream, session, params) => subscriptions.updated(session, params),
    onSessionClosed: (upstream, session) => subscriptions.sessionClosed(upstream, session),
    onOrphanRequest: async (_upstream, session, method, params, signal) => {
      const missing = clientSupports(session.capabilities as JsonObject, method, params)
      if (missing) throw new GatewayError('GW_ERR_CLIENT_CAPABILITY_MISSING', [missing, method])
      return await targets.askClient(session.key, method, params, signal)
    },
    onOrphanNotification: (_upstream, session, method, params) => targets.notifyClient(session.key, { jsonrpc: '2.0', method, params }),
  }
}
