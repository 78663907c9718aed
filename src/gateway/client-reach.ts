import type { CatalogSyncTargets } from '../catalog/catalog-sync.ts'
import { GatewayError } from '../errors.ts'
import { ignoreWithTrace } from '../observability/ignored.ts'
import type { Logger } from '../observability/logger.ts'
import type { ClientRequestBroker } from '../protocol/2025-11-25/client-requests.ts'
import type { SessionRequests } from '../protocol/2025-11-25/session-requests.ts'
import type { ListenHub } from '../protocol/2026-07-28/listen-hub.ts'
import { BUS, publishOn, subscribeTo } from '../store/bus-channels.ts'
import type { SignalBus } from '../store/types.ts'
import type { StreamHub } from '../streams/stream-hub.ts'
import { sessionIdOf } from '../upstream/client-ref.ts'
import type { InputMethod } from '../upstream/call-attribution.ts'
import type { JsonObject, RpcMessage, RpcNotification } from '../wire/jsonrpc.ts'

export interface ClientReachDeps {
  /** The streams of 2025-11-25 sessions. */
  hub: StreamHub
  /** The `subscriptions/listen` streams of 2026-07-28 clients. */
  listen: ListenHub
  bus: SignalBus
  /** Requests for a session's GET stream, and the broker that routes their answers back. */
  sessionRequests: SessionRequests
  broker: ClientRequestBroker
  log: Logger
}

/**
 * How what the upstreams say outside any call reaches clients of either era: a list change to every client
 * (of this process, or of every process sharing the store), a notification to one client, a request to one
 * client. It is the one part that knows both eras' ways to a client, which is why it sits above them both.
 */
export class ClientReach implements Pick<CatalogSyncTargets, 'broadcast' | 'notifyClient' | 'askClient'> {
  readonly #deps: ClientReachDeps

  constructor (deps: ClientReachDeps) {
    this.#deps = deps
  }

  /** Hears the list changes any process announces to every client (see broadcast); returns how to stop. */
  listen (): () => void {
    return subscribeTo(this.#deps.bus, BUS.listChanged, undefined, ({ method }) => this.#broadcastLocal({ jsonrpc: '2.0', method }))
  }

  /**
   * Tells every client of a list change: of this process, or through the bus of every process (`everywhere`).
   * When the bus cannot take it, this process's clients are still told.
   */
  broadcast (message: RpcNotification, everywhere: boolean): void {
    if (!everywhere) {
      this.#broadcastLocal(message)
      return
    }
    publishOn(this.#deps.bus, BUS.listChanged, undefined, { method: message.method }).catch((err: unknown) => {
      this.#deps.log.debug({ err, method: message.method }, 'could not announce a list change to the other processes: told the clients of this one')
      this.#broadcastLocal(message)
    })
  }

  /** A session's client hears it on its streams; a 2026-07-28 client (keyed by principal) on its listen streams. */
  notifyClient (clientKey: string, message: RpcNotification): void {
    const sessionId = sessionIdOf(clientKey)
    if (sessionId === undefined) {
      this.#deps.listen.listChangedFor(clientKey, message.method)
      return
    }
    this.#deps.hub.publish(sessionId, message).catch(ignoreWithTrace(this.#deps.log, 'a list change could not be sent to a session; the client sees the new list when it next lists', { method: message.method }))
  }

  /** A resource update to a subscriber: a 2026-07-28 listen stream (`listen:…`), else a session's streams. */
  deliver (subscriber: string, message: RpcNotification): void {
    if (subscriber.startsWith('listen:')) {
      this.#deps.listen.deliver(subscriber, message)
      return
    }
    this.#deps.hub.publish(subscriber, message).catch(ignoreWithTrace(this.#deps.log, 'a resource update could not be sent to a session; the client reads the resource again when it next reads it'))
  }

  /**
   * Asks a session's client on its GET stream (now, or once one opens) and waits for the answer the broker
   * routes back. A 2026-07-28 client has no stream to be asked on outside a call.
   */
  async askClient (clientKey: string, method: InputMethod, params: JsonObject, signal: AbortSignal): Promise<JsonObject> {
    const sessionId = sessionIdOf(clientKey)
    if (sessionId === undefined) throw new GatewayError('GW_ERR_CLIENT_UNREACHABLE', [method, 'a 2026-07-28 client can only be asked during a call'])
    const { sessionRequests, broker, log } = this.#deps
    // A request that cannot be sent is never answered: the broker's wait ends with the signal (the upstream's timeout).
    const lost = ignoreWithTrace(log, 'a request to a session could not be sent; the upstream request times out unanswered', { method })
    const emit = (message: RpcMessage): void => { sessionRequests.send(sessionId, message).catch(lost) }
    return await broker.send(sessionId, emit, method, params, signal)
  }

  #broadcastLocal (message: RpcNotification): void {
    this.#deps.hub.broadcastLocal(message)
    this.#deps.listen.listChanged(message.method)
  }
}
