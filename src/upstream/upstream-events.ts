import type { JsonObject } from '../wire/jsonrpc.ts'
import type { InputMethod } from './call-attribution.ts'
import type { Upstream } from './upstream.ts'
import type { ListKind, UpstreamSession } from './upstream-session.ts'

// What the rest of the gateway sees of an upstream besides the Upstream class itself: its states, what it
// reports, and the lease of a session.

export type UpstreamState = 'starting' | 'ready' | 'down' | 'closed'

/** What the gateway learns from an upstream and its sessions. */
export interface UpstreamEvents {
  onReady (upstream: Upstream): void
  /** The upstream was ready and is not any more. */
  onDown (upstream: Upstream, reason: string): void
  onListChanged (upstream: Upstream, session: UpstreamSession, kind: ListKind): void
  onResourceUpdated (upstream: Upstream, session: UpstreamSession, params: JsonObject): void
  onSessionClosed (upstream: Upstream, session: UpstreamSession): void
  /** A request of the upstream that belongs to no call, on a session that serves one client (`session.key`). */
  onOrphanRequest (
    upstream: Upstream,
    session: UpstreamSession,
    method: InputMethod,
    params: JsonObject,
    signal: AbortSignal,
  ): Promise<JsonObject>
  onOrphanNotification (upstream: Upstream, session: UpstreamSession, method: string, params: JsonObject): void
}

/** What an upstream announces about itself in its handshake (initialize or server/discover). */
export interface UpstreamOffer {
  readonly capabilities: JsonObject
  readonly instructions: string | undefined
}

/** A session held for one use (a call, a read, a task, a subscription); `release` once done. */
export interface SessionLease {
  readonly session: UpstreamSession
  release (): void
}

/** What a session is wanted for: `call` (tools/call, prompts/get, lists) or `read` (reads, completions, subscriptions). */
export type Purpose = 'call' | 'read'
