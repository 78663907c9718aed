import type { ResourceSubscriptions } from '../catalog/resource-subscriptions.ts'
import type { Logger } from '../observability/logger.ts'
import type { JsonObject } from '../wire/jsonrpc.ts'
import type { StreamHub } from '../streams/stream-hub.ts'
import { BUS, publishOn, subscribeTo } from '../store/bus-channels.ts'
import type { SignalBus } from '../store/types.ts'
import type { TaskService } from '../tasks/task-service.ts'
import { sessionClientKey } from '../upstream/client-ref.ts'
import type { Upstream } from '../upstream/upstream.ts'
import { ignoreWithTrace } from '../observability/ignored.ts'

export interface SessionEndDeps {
  bus: SignalBus
  /** The upstreams of this process (the list a reload changes in place). */
  upstreams: readonly Upstream[]
  hub: StreamHub
  subscriptions: ResourceSubscriptions
  tasks: TaskService
  log: Logger
}

/**
 * What happens when a client's (2025-11-25) session ends, whether the client deleted it, its last stream
 * closed, or it sat idle past `server.sessionIdleTimeout`. What the session held dies with it:
 *
 * - its upstream sessions, wherever they are: a client's upstream sessions live on its home process, which
 *   may be another one, so the end is announced to every process sharing the store;
 * - its resource subscriptions;
 * - with auth off, its tasks (their principal is the session itself, so nobody else could ever reach them).
 *
 * The client's notifications for its upstream sessions travel the same channel to the same process.
 */
export class SessionEnd {
  readonly #deps: SessionEndDeps

  constructor (deps: SessionEndDeps) {
    this.#deps = deps
  }

  /** Hears, on this process, the ends and notifications of clients announced by any process; returns how to stop. */
  listen (): () => void {
    const { bus, upstreams, log } = this.#deps
    const dropped = ignoreWithTrace(log, 'a client notification was not passed to its upstream session (closing or gone); notifications get no answer to wait for')
    return subscribeTo(bus, BUS.clients, undefined, (message) => {
      for (const upstream of upstreams) {
        if (message.type === 'ended') upstream.endClient(message.clientKey)
        else upstream.sessionByKey(message.clientKey)?.notify(message.method, message.params).catch(dropped)
      }
    })
  }

  /** Sends a client's notification to its upstream sessions, on whichever process holds them. */
  relayNotification (clientKey: string, method: string, params: JsonObject): void {
    publishOn(this.#deps.bus, BUS.clients, undefined, { type: 'notify', clientKey, method, params })
      .catch(ignoreWithTrace(this.#deps.log, 'a client notification was not announced to the process holding its upstream sessions', { method }))
  }

  /** Releases what the session held. */
  async end (sessionId: string): Promise<void> {
    const { bus, subscriptions, tasks, log } = this.#deps
    await publishOn(bus, BUS.clients, undefined, { type: 'ended', clientKey: sessionClientKey(sessionId) })
    await subscriptions.dropSubscriber(sessionId)
    const cancelled = await tasks.cancelAllOf(`anonymous:${sessionId}`)
    if (cancelled > 0) log.info({ sessionId, cancelled }, 'cancelled the tasks of an ended anonymous session')
  }

  /** The session was deleted or lost its last stream (the legacy endpoint already forgot it). */
  closed (sessionId: string): void {
    this.end(sessionId).catch((err: unknown) => this.#deps.log.warn({ err, sessionId }, 'could not release what an ended session held'))
  }

  /**
   * The store dropped these sessions for idleness: their open streams close at once, then what each held is
   * released. Settles when every release has (a failed one is logged, not thrown).
   */
  async expired (sessionIds: readonly string[]): Promise<void> {
    const { hub, log } = this.#deps
    for (const sessionId of sessionIds) hub.closeSession(sessionId)
    await Promise.all(sessionIds.map(async (sessionId) => {
      await this.end(sessionId).catch((err: unknown) => log.warn({ err, sessionId }, 'could not release what an expired session held'))
    }))
  }
}
