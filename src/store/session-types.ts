import type { JsonObject } from '../wire/jsonrpc.ts'

/** The legacy-era sessions of the store contract (see types.ts). */

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

export interface SessionCreateOptions {
  /**
   * The key the session is counted under for limits.sessionsPerPrincipal (countOf): `anonymous@<address>` for
   * a caller without auth, so that one address cannot open sessions without bound; default: the principal.
   * The session's bytes (its client capabilities and client info, as JSON) count under it too, with those of
   * the account's tasks (TaskStore.storedBytes), until the session is deleted or swept.
   */
  account?: string
  /**
   * Refuses the session with GW_ERR_STORED_BYTES_LIMIT when its bytes would take its account past this many
   * stored bytes (limits.storedBytesPerPrincipal; see TaskCreateOptions.maxStoredBytes).
   */
  maxStoredBytes?: number
  /**
   * Refuses the session with GW_ERR_SESSION_LIMIT when its account already holds this many sessions
   * (limits.sessionsPerPrincipal). The count and the insert are one atomic step, also between processes
   * sharing the store: of racing creates, exactly this many win.
   */
  maxSessions?: number
}

export interface SessionStore {
  /** Stores a new session; the id is unique (CSPRNG) so no conflict check is made. */
  create (session: SessionRecord, options?: SessionCreateOptions): Promise<void>
  /** The session, or null when it never existed, was deleted or expired. */
  get (id: string): Promise<SessionRecord | null>
  /** Records use of the session at `at` (epoch ms); a no-op for an unknown id. */
  touch (id: string, at: number): Promise<void>
  /** Deletes the session; true when it existed. */
  delete (id: string): Promise<boolean>
  /** Deletes sessions last seen before `before` (epoch ms); returns their ids. */
  sweep (before: number): Promise<string[]>
  /**
   * Sessions counted under `account` (SessionCreateOptions.account, else their principal) that exist (not deleted,
   * not swept), counted up to `atMost` (enough to check a limit).
   */
  countOf (account: string, atMost: number): Promise<number>
}
