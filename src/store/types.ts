import type { JsonObject } from '../protocol/jsonrpc.ts'

/**
 * The store contract. Every gateway process talks to shared state only through this interface, so
 * that any process can serve any request. All stored data is JSON-serialisable. Stores throw the
 * gateway's own error codes, never a backend's message.
 *
 * Not in the contract: transactions, connections or any backend type.
 */

/** A legacy-era (initialize) session. */
export interface SessionRecord {
  id: string
  /** Who owns the session; `anonymous:<sessionId>` when auth is off. */
  principal: string
  protocolVersion: string
  clientCapabilities: JsonObject
  clientInfo: JsonObject
  /** Epoch milliseconds. */
  createdAt: number
  /** Epoch milliseconds of the last request that used the session. */
  lastSeenAt: number
}

export interface SessionStore {
  /** Stores a new session; the id is unique (CSPRNG) so no conflict check is made. */
  create (session: SessionRecord): Promise<void>
  /** The session, or null when it never existed, was deleted or expired. */
  get (id: string): Promise<SessionRecord | null>
  /** Records use of the session at `at` (epoch ms); a no-op for an unknown id. */
  touch (id: string, at: number): Promise<void>
  /** Deletes the session; true when it existed. */
  delete (id: string): Promise<boolean>
  /** Deletes sessions last seen before `before` (epoch ms); returns their ids. */
  sweep (before: number): Promise<string[]>
}

export type BusHandler = (message: JsonObject) => void

/**
 * Signals between processes: "something for this session/call happened". Delivery is at most once and
 * only to subscribers alive at publish time; durable data always goes through the record stores.
 */
export interface SignalBus {
  publish (channel: string, message: JsonObject): Promise<void>
  /** Returns an unsubscribe function. Handlers must not throw. */
  subscribe (channel: string, handler: BusHandler): () => void
}

export interface StoreHealth {
  ok: boolean
  kind: string
  detail?: string
}

export interface GatewayStore {
  readonly kind: string
  readonly sessions: SessionStore
  readonly bus: SignalBus
  /** Liveness of the backend for /readyz. */
  health (): Promise<StoreHealth>
  /** Releases the backend; the store is unusable afterwards. */
  close (): Promise<void>
}
