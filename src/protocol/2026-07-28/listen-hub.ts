import type { JsonObject, RpcMessage, RequestId } from '../../wire/jsonrpc.ts'
import { ListChangeCoalescer } from '../../wire/list-changes.ts'
import { SUBSCRIPTION_ID_KEY } from './envelope.ts'

export interface ListenFilter {
  toolsListChanged: boolean
  promptsListChanged: boolean
  resourcesListChanged: boolean
  resourceSubscriptions: string[]
  taskIds: string[]
}

interface Listener {
  /** The client the stream belongs to (its ClientRef key). */
  clientKey: string
  subscriptionId: RequestId
  filter: ListenFilter
  send (message: RpcMessage): void
}

const LIST_FLAG: Readonly<Record<string, keyof ListenFilter>> = {
  'notifications/tools/list_changed': 'toolsListChanged',
  'notifications/prompts/list_changed': 'promptsListChanged',
  'notifications/resources/list_changed': 'resourcesListChanged',
}

/** Stamps a notification with the subscription it is delivered under, as listen streams require. */
export function onSubscription (subscriptionId: RequestId, method: string, params: JsonObject = {}): RpcMessage {
  const meta = (params._meta ?? {}) as JsonObject
  return { jsonrpc: '2.0', method, params: { ...params, _meta: { ...meta, [SUBSCRIPTION_ID_KEY]: subscriptionId } } }
}

/** The open `subscriptions/listen` streams of this process, each with the filter it was granted. */
export class ListenHub {
  readonly #listeners = new Map<string, Listener>()
  /**
   * The window only, not the rule of sessions (told once until listed): a 2026-07-28 list request names no
   * listen stream, only its client key (principal and capabilities, shared by every such client of the
   * principal), and may reach another process than the one holding the stream, so nothing ties a read to
   * the stream it would free. Copies of one change further apart than the window reach a stream twice.
   */
  readonly #listChanges = new ListChangeCoalescer({ untilListed: false })

  add (id: string, listener: Listener): () => void {
    this.#listeners.set(id, listener)
    return () => { this.#listeners.delete(id) }
  }

  /** A list change for every client: to every stream that asked for it. */
  listChanged (method: string): void {
    for (const id of this.#listeners.keys()) this.#listChanged(id, method)
  }

  /** A list change of one client's own upstream session: to that client's streams that asked for it. */
  listChangedFor (clientKey: string, method: string): void {
    for (const [id, listener] of this.#listeners) if (listener.clientKey === clientKey) this.#listChanged(id, method)
  }

  /** A resource update for the stream registered as `id` (resource subscriptions are per stream). */
  deliver (id: string, message: RpcMessage): void {
    const listener = this.#listeners.get(id)
    if (!listener || !('method' in message)) return
    listener.send(onSubscription(listener.subscriptionId, message.method, ('params' in message ? message.params : undefined) ?? {}))
  }

  get size (): number {
    return this.#listeners.size
  }

  #listChanged (id: string, method: string): void {
    const flag = LIST_FLAG[method]
    if (flag === undefined || this.#listeners.get(id)?.filter[flag] !== true) return
    this.#listChanges.schedule(id, method, () => {
      const listener = this.#listeners.get(id)
      if (listener) listener.send(onSubscription(listener.subscriptionId, method))
      return listener !== undefined
    })
  }
}
