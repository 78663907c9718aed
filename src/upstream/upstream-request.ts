import type { UpstreamConfig } from '../config/schema.ts'
import type { TraceParent } from '../observability/tracing.ts'
import type { JsonObject } from '../wire/jsonrpc.ts'
import type { ClientRef } from './client-ref.ts'
import { mapUpstreamError } from './upstream-errors.ts'
import type { Purpose, SessionLease } from './upstream-events.ts'
import type { SessionAddress, SessionRequestOptions, UpstreamSession } from './upstream-session.ts'
import type { Upstream } from './upstream.ts'

/** What a request to an upstream is, whom it is for, and what bounds it. */
export interface RequestPlan {
  /** The method sent (the first, for a call that sends several): it names the request and picks its timeout. */
  method: string
  /** The upstream's own name of the tool or prompt called (`tools/call`, `prompts/get`), if any. */
  target?: string | undefined
  /** The client whose upstream session carries the request. */
  client: ClientRef
  /** `call` (tools/call, prompts/get) or `read` (reads, completions, subscriptions, the log level): see Upstream.acquire. */
  purpose: Purpose
  /** Aborted when nobody waits for the answer any more: the request is cancelled upstream, and fails as cancelled. */
  signal?: AbortSignal | undefined
  /** The caller's own Authorization header: it picks the session, and is sent, where the upstream has forwardAuthorization. */
  authorization?: string | undefined
  /** The span the request is made for (tracing on); `traceName`: the tool or prompt its span names. */
  trace?: TraceParent | undefined
  traceName?: string | undefined
  /** Upstream work another gateway process started on a session of its own: the request goes on that session. */
  rejoin?: SessionAddress | undefined
  /** Awaited before a session is taken, within the request's error mapping (a call's wait for its call slot). */
  admit?: (() => Promise<void>) | undefined
}

/** A tool's own timeout (toolSettings) over timeouts.call for a tools/call; timeouts.request for anything else. */
export function requestTimeout (config: UpstreamConfig, method: string, target?: string): number {
  if (method !== 'tools/call') return config.timeouts.request
  return (target === undefined ? undefined : config.toolSettings[target]?.timeout) ?? config.timeouts.call
}

/** The caller's Authorization header when `upstream` is configured to receive it (forwardAuthorization); else undefined. */
export function forwardedAuthorization (upstream: Upstream, authorization: string | undefined): string | undefined {
  return upstream.forwardsAuthorization ? authorization : undefined
}

/**
 * One request under way on its session: what the work given to requestUpstream sends with. Its options carry the
 * request's timeout, signal, forwarded Authorization header and span, the same for every message it sends.
 */
export class UpstreamRequest {
  readonly session: UpstreamSession
  readonly timeout: number
  /** What each message of the request is sent with (see UpstreamSession.request). */
  readonly options: SessionRequestOptions
  readonly #lease: SessionLease
  #kept = false

  constructor (lease: SessionLease, timeout: number, options: SessionRequestOptions) {
    this.session = lease.session
    this.timeout = timeout
    this.options = options
    this.#lease = lease
  }

  /** Sends one message of the request on its session; the upstream's result comes back untouched. */
  async send (method: string, params: JsonObject | undefined): Promise<JsonObject> {
    return await this.session.request(method, params, this.options)
  }

  /**
   * Keeps the session held after the request ended (a subscription holds its session while it lasts): the
   * returned function releases it.
   */
  keep (): () => void {
    this.#kept = true
    return () => { this.#lease.release() }
  }

  /** The request ended: its session is released, unless it was kept. */
  end (): void {
    if (!this.#kept) this.#lease.release()
  }
}

/**
 * What a failed request becomes for its caller: an upstream a reload took away fails its last requests with that
 * reason, not as a lost connection; anything else as mapUpstreamError says.
 */
export function requestFailure (upstream: Upstream, plan: RequestPlan, err: unknown): Error {
  const { method, target, signal } = plan
  const closed = signal?.aborted === true ? undefined : upstream.closedBy
  if (closed !== undefined) return closed
  return mapUpstreamError(err, upstream.name, target === undefined ? method : `${method} '${target}'`, requestTimeout(upstream.config, method, target), signal)
}

/**
 * The one way a request reaches an upstream, whatever it is (a call, a read, a prompt, a completion, a
 * subscription): on the session of its client (or the session another process opened for its work), held for
 * the request and released on every exit, bounded by the upstream's timeout for it, traced under its span, and
 * failing with the gateway's errors, which name the upstream and the request. `work` sends the request's messages
 * (a call may send several: input rounds, an upstream task's polls).
 */
export async function requestUpstream<T> (
  upstream: Upstream,
  plan: RequestPlan,
  work: (request: UpstreamRequest) => Promise<T>,
): Promise<T> {
  const timeout = requestTimeout(upstream.config, plan.method, plan.target)
  plan.trace?.target?.(upstream.name, plan.traceName)
  let request: UpstreamRequest | undefined
  try {
    await plan.admit?.()
    const rejoin = plan.rejoin
    const lease = rejoin === undefined || rejoin.sessionId === null
      ? await upstream.acquire(plan.client, plan.purpose, plan.authorization)
      : await upstream.rejoin(rejoin, plan.client.principal)
    request = new UpstreamRequest(lease, timeout, {
      timeout,
      signal: plan.signal,
      authorization: forwardedAuthorization(upstream, plan.authorization),
      trace: plan.trace,
    })
    return await work(request)
  } catch (err) {
    throw requestFailure(upstream, plan, err)
  } finally {
    request?.end()
  }
}
