import { setMaxListeners } from 'node:events'
import type { PriorDiscovery } from '@modelcontextprotocol/client'
import type { UpstreamConfig } from '../config/schema.ts'
import { formatDuration } from '../config/units.ts'
import { forwardAuthorizationWarning } from '../config/config-warnings.ts'
import { GatewayError, errorMessage } from '../errors.ts'
import type { Revision } from '../wire/versions.ts'
import { ignoreWithTrace } from '../observability/ignored.ts'
import type { Logger } from '../observability/logger.ts'
import { CallSlots } from './call-slots.ts'
import { GATEWAY_CLIENT, GATEWAY_KEY, credentialTag, type ClientRef } from './client-ref.ts'
import type { Purpose, SessionLease, UpstreamEvents, UpstreamOffer, UpstreamState } from './upstream-events.ts'
import { createUpstreamHttp, type UpstreamHttp } from './http-dispatcher.ts'
import { UpstreamSession, type SessionAddress, type SessionOpenOptions } from './upstream-session.ts'
import { connectFailure } from './upstream-errors.ts'
import { upstreamSessionEvents } from './upstream-session-events.ts'
import { RejoinedSessions } from './rejoined-sessions.ts'
import { SessionPool, type PoolLimits } from './session-pool.ts'
import { ClientSessions } from './client-sessions.ts'
import { PerCallSessions } from './per-call-sessions.ts'
import { createUpstreamCredentials, sessionCredentials, type CredentialSources } from './credentials/create-credentials.ts'
import type { CallerTokens } from '../auth/caller-tokens.ts'
import { credentialFailure, type UpstreamCredentials } from './credentials/upstream-credentials.ts'

/**
 * One configured upstream and its sessions. The gateway's own session (declaring no client capabilities)
 * tells whether the upstream is up and gives the lists every client starts from. Clients get sessions
 * by `upstreams[].sessions`:
 *
 * - `per-client`: one session per client (see ClientRef), opened on first use, so a stateful server sees
 *   each client as its own; it closes when the client ends, or after `idleTimeout` unused;
 * - `shared`: one session for all clients that declare the same capabilities (stateless servers);
 * - `per-call`: one exclusive session per call, kept idle for reuse by calls of the same capabilities;
 *   reads and subscriptions use the gateway's own session.
 *
 * With forwardAuthorization, a session is also keyed by the credential it was opened with (see
 * credentialTag): it serves callers with that credential only. With `credentials` whose sharing is
 * `principal`, a session is keyed by its principal, and its requests carry that principal's credential.
 *
 * Every client session counts in one SessionPool, whatever the mode: `maxSessions` caps them,
 * `maxSessionsPerPrincipal` caps one principal's, and idle ones make room when needed. A session that calls,
 * tasks or subscriptions hold is never closed for idleness or room. `maxConcurrentCalls` caps the calls in
 * flight across all sessions.
 */
export class Upstream {
  /** Its options; only retune changes them. */
  config: UpstreamConfig
  state: UpstreamState = 'starting'
  /** Reconnect attempts scheduled since start (gateway_upstream_reconnects_total). */
  reconnects = 0
  lastError: string | undefined
  /** 2026-07-28 results that lacked `resultType` and were taken as complete (see UpstreamSession). */
  resultsWithoutResultType = 0
  /** Why the upstream was closed while the gateway runs on (a reload removed or replaced it). */
  closedBy: GatewayError | undefined
  readonly slots: CallSlots
  /** `upstreams[].credentials`: what the requests of a client's session are sent with (not the gateway's own). */
  readonly credentials: UpstreamCredentials | undefined
  /** What the gateway's own session is sent with (OAuth: a token of the gateway's client); the callers' tokens to exchange. */
  readonly #ownCredentials: UpstreamCredentials | undefined
  readonly #callerTokens: CallerTokens | undefined
  readonly #log: Logger
  readonly #events: UpstreamEvents
  readonly #http: UpstreamHttp | undefined
  #gateway: UpstreamSession | undefined
  #prior: PriorDiscovery | undefined
  #offered: UpstreamOffer | undefined
  readonly #pool: SessionPool<UpstreamSession>
  /** Per-client and shared sessions, by slot key (see #slotKey). */
  readonly #clients: ClientSessions
  readonly #perCall: PerCallSessions
  readonly #rejoined = new RejoinedSessions((key, rejoin, principal) => this.#openSession(key, { key, principal, capabilities: {}, signature: '{}' }, undefined, rejoin))
  #attempt = 0
  #reconnectTimer: NodeJS.Timeout | undefined
  readonly #reaper: NodeJS.Timeout
  readonly #closing = new AbortController()
  #firstAttemptEnded!: () => void
  /** Resolves when the first connect has ended, whether the upstream came up or not (or it was closed). */
  readonly firstAttempt = new Promise<void>((resolve) => { this.#firstAttemptEnded = resolve })

  constructor (config: UpstreamConfig, log: Logger, events: UpstreamEvents, sources?: CredentialSources) {
    this.config = config
    this.#log = log.child({ upstream: config.name })
    this.#events = events
    this.#http = config.transport === 'stdio' ? undefined : createUpstreamHttp(config)
    const credentials = createUpstreamCredentials(config, this.#log, sources?.grants)
    this.credentials = credentials.callers
    this.#ownCredentials = credentials.gateway
    this.#callerTokens = sources?.callerTokens
    if (this.forwardsAuthorization) this.#log.warn({ option: 'forwardAuthorization' }, forwardAuthorizationWarning(config.name))
    this.slots = new CallSlots(config.name, config.maxConcurrentCalls, config.maxQueuedCalls, config.maxConcurrentCallsPerPrincipal)
    this.#pool = new SessionPool(config.name, () => this.#limits(), (session) => this.#evict(session))
    this.#clients = new ClientSessions(this.#pool)
    this.#perCall = new PerCallSessions(this.#pool)
    this.#reaper = setInterval(() => this.#reapIdle(), Math.min(30_000, Math.max(1000, Math.floor(config.idleTimeout / 2))))
    // Every session being opened listens to it: with per-call sessions, as many as the calls starting at once.
    setMaxListeners(0, this.#closing.signal)
    this.#reaper.unref()
  }

  get name (): string {
    return this.config.name
  }

  /** New filters, tool settings or task support (a reload; same name): for lists read and calls started from now on. */
  retune (config: UpstreamConfig): void {
    this.config = config
  }

  /** The open sessions that serve clients (per-client or shared), whose lists a retune makes stale. */
  get clientSessions (): IterableIterator<UpstreamSession> {
    return this.#clients.values()
  }

  /**
   * Client sessions open (or opening); for stdio, the processes running (the gateway's own session's and one per
   * client session; undefined for HTTP); calls running, waiting for a call slot, or waiting on their client without one (parked).
   */
  get load (): { sessions: number, processes: number | undefined, active: number, waiting: number, parked: number } {
    const { active, waiting, parked } = this.slots
    const sessions = this.#pool.size
    const processes = this.config.transport === 'stdio' ? sessions + (this.era === undefined ? 0 : 1) : undefined
    return { sessions, processes, active, waiting, parked }
  }

  /** The protocol revision the gateway's own session speaks; undefined while it is not open. */
  get era (): Revision | undefined {
    const session = this.#gateway
    if (session === undefined || session.closed) return undefined
    return session.client.getProtocolEra?.() === 'modern' ? '2026-07-28' : '2025-11-25'
  }

  /** The upstream speaks 2026-07-28 and offers the tasks extension (as its gateway session found it). */
  get offersTasks (): boolean {
    const session = this.#gateway
    return session !== undefined && !session.closed && session.offersTasks
  }

  /**
   * What the upstream announced to the gateway's own session when it last connected (its server capabilities
   * and instructions); kept while it is down; undefined until it has connected once.
   */
  get offered (): UpstreamOffer | undefined {
    return this.#offered
  }

  /** Why the upstream is not ready, when it is not. */
  get reason (): string | undefined {
    if (this.state === 'starting') return `connecting (first attempt, up to ${formatDuration(this.config.timeouts.connect)}: timeouts.connect)`
    return this.state === 'ready' ? undefined : this.lastError
  }

  /** Opens the gateway's own session; never throws: a failure marks the upstream down and retries with backoff. */
  async start (): Promise<void> {
    try {
      await this.#connect()
    } finally {
      this.#firstAttemptEnded()
    }
  }

  async #connect (): Promise<void> {
    if (this.state === 'closed') return
    try {
      const session = await this.#openSession(GATEWAY_KEY, GATEWAY_CLIENT)
      if ((this.state as UpstreamState) === 'closed') {
        await session.close()
        return
      }
      const era = session.client.getProtocolEra?.()
      const discover = session.client.getDiscoverResult?.()
      this.#prior = era === 'modern' && discover ? { kind: 'modern', discover } : { kind: 'legacy' }
      const instructions = session.client.getInstructions() ?? discover?.instructions
      this.#offered = { capabilities: session.client.getServerCapabilities() ?? {}, instructions }
      this.#gateway = session
      this.#attempt = 0
      this.state = 'ready'
      this.lastError = undefined
      this.#log.info({ era, protocolVersion: session.client.getNegotiatedProtocolVersion?.() }, 'upstream connected')
      this.#events.onReady(this)
    } catch (err) {
      this.#markDown(connectFailure(err, this.config))
    }
  }

  /** The gateway's own session; throws GW_ERR_UPSTREAM_UNAVAILABLE when the upstream is down. */
  gatewaySession (): UpstreamSession {
    if (this.state === 'ready' && this.#gateway && !this.#gateway.closed) return this.#gateway
    throw this.#unavailable()
  }

  /**
   * The session that serves `client` (see the class comment), opened if needed, held until released.
   * `authorization`: the caller's own Authorization header, which a new session of an upstream with
   * forwardAuthorization sends from its handshake on.
   */
  async acquire (client: ClientRef, purpose: Purpose, authorization?: string): Promise<SessionLease> {
    // Whatever needs the upstream during its first connect (a task run again at start) waits for it.
    if (this.state === 'starting') await this.firstAttempt
    if (this.state === 'closed') throw this.closedBy ?? new GatewayError('GW_ERR_SHUTTING_DOWN')
    const refused = this.credentials?.refusal?.({ principal: client.principal })
    if (refused !== undefined) throw refused
    const forwarded = this.forwardsAuthorization ? authorization : undefined
    const mode = this.config.sessions
    if (mode === 'per-call') return purpose === 'read' ? this.#lease(this.gatewaySession()) : await this.#exclusiveLease(client, forwarded)
    const key = this.#slotKey(client, forwarded)
    const open = this.#clients.get(key)
    if (open !== undefined) return this.#lease(open)
    if (this.state !== 'ready') throw this.#unavailable()
    const opening = this.#clients.obtain(key, client.principal, () => this.#openSession(client.key, client, forwarded))
    let session: UpstreamSession
    try {
      session = await opening
    } catch (err) {
      throw credentialFailure(err) ?? new GatewayError('GW_ERR_UPSTREAM_UNAVAILABLE', [this.name, errorMessage(err)], { cause: err })
    }
    if (session.closed) throw new GatewayError('GW_ERR_UPSTREAM_UNAVAILABLE', [this.name, 'its session closed while it was opened'])
    return this.#lease(session)
  }

  /** The limits of the session pool in force (a reload may change them). */
  #limits (): PoolLimits {
    const { maxSessions, maxSessionsPerPrincipal, abandonedTimeout } = this.config
    const perPrincipal = maxSessionsPerPrincipal ?? Math.max(1, Math.floor(maxSessions / 4))
    return { max: maxSessions, perPrincipal, abandonedAfter: abandonedTimeout }
  }

  /**
   * The upstream session at `address`, which another gateway process opened, for a task this one adopted
   * (see RejoinedSessions).
   */
  async rejoin (address: SessionAddress, principal: string): Promise<SessionLease> {
    if (this.state === 'starting') await this.firstAttempt
    if (this.state === 'closed') throw this.closedBy ?? new GatewayError('GW_ERR_SHUTTING_DOWN')
    return await this.#rejoined.lease(address, this.credentials === undefined ? '' : principal)
  }

  /**
   * The open session that serves `client`, if there is one (nothing is opened); `authorization`: the
   * caller's own header, which picks the session with forwardAuthorization.
   */
  sessionOf (client: ClientRef, authorization?: string): UpstreamSession | undefined {
    if (this.config.sessions === 'per-call') return undefined
    return this.#clients.get(this.#slotKey(client, this.forwardsAuthorization ? authorization : undefined))
  }

  /** An open per-client session of the client `key` names (with forwardAuthorization, it may have several). */
  sessionByKey (key: string): UpstreamSession | undefined {
    if (this.config.sessions !== 'per-client') return undefined
    return this.#clients.ofClient(key).next().value ?? undefined
  }

  /** The client is gone (its 2025-era session ended): its sessions close once nothing holds them. */
  endClient (clientKey: string): void {
    if (this.config.sessions !== 'per-client') return
    for (const session of this.#clients.endClient(clientKey)) if (session.holds === 0) this.#retire(session)
  }

  /** Closes every session (calls still running fail); `reason`: why, when the gateway runs on without it. */
  async close (reason?: GatewayError): Promise<void> {
    const why = reason ?? new GatewayError('GW_ERR_SHUTTING_DOWN')
    this.closedBy = reason
    this.state = 'closed'
    this.#closing.abort(why)
    this.#firstAttemptEnded()
    clearTimeout(this.#reconnectTimer)
    clearInterval(this.#reaper)
    this.slots.rejectAll(why)
    const failedOpen = ignoreWithTrace(this.#log, 'a session still opening at close failed to open; whoever waited for it was told')
    const opening = this.#clients.clear().map(async (p) => await p.then(async (s) => { await s.close() }, failedOpen))
    const all = [...this.#perCall.drain(), ...(this.#gateway ? [this.#gateway] : [])]
    this.#gateway = undefined
    await Promise.all([...opening, this.#rejoined.detachAll(this.#log), ...all.map(async (s) => await s.close())])
    await Promise.all([this.#http?.close(), this.credentials?.close(), this.#ownCredentials?.close()])
  }

  /**
   * What a new session lists depends on the capabilities it declares and, when the upstream is sent each
   * caller's own Authorization header, on who the caller is and on that header (`authorization`).
   */
  listKeyOf (client: Pick<ClientRef, 'signature' | 'principal'>, authorization?: string): string {
    if (this.credentials?.sharing === 'principal') return `${client.signature} ${client.principal}`
    return this.forwardsAuthorization ? `${client.signature} ${client.principal} ${credentialTag(authorization)}` : client.signature
  }

  /** Whether the upstream is sent each caller's own Authorization header (forwardAuthorization). */
  get forwardsAuthorization (): boolean {
    return this.config.transport === 'streamable-http' && this.config.forwardAuthorization
  }

  /** Where a per-client or shared session is registered: its client (or capabilities) and forwarded credential. */
  #slotKey (client: ClientRef, forwarded: string | undefined): string {
    if (this.config.sessions !== 'per-client') return `shared:${this.listKeyOf(client, forwarded)}`
    return this.forwardsAuthorization ? `${client.key}\u0000${credentialTag(forwarded)}` : client.key
  }

  #lease (session: UpstreamSession): SessionLease {
    const unhold = session.hold()
    return {
      session,
      release: () => {
        unhold()
        if (session.ended && session.holds === 0) this.#retire(session)
      },
    }
  }

  /** per-call: a session for this call alone (see PerCallSessions). */
  async #exclusiveLease (client: ClientRef, authorization: string | undefined): Promise<SessionLease> {
    if (this.state !== 'ready') throw this.#unavailable()
    return await this.#perCall.lease(client, this.listKeyOf(client, authorization), async () => {
      try {
        return await this.#openSession(`call:${client.signature}`, client, authorization)
      } catch (err) {
        throw credentialFailure(err) ?? new GatewayError('GW_ERR_UPSTREAM_UNAVAILABLE', [this.name, errorMessage(err)], { cause: err })
      }
    }, () => this.state === 'ready')
  }

  async #openSession (key: string, client: ClientRef, authorization?: string, rejoin?: SessionOpenOptions['rejoin']): Promise<UpstreamSession> {
    const session = await UpstreamSession.open({
      rejoin,
      key,
      authorization,
      config: this.config,
      http: this.#http,
      capabilities: client.capabilities,
      signature: client.signature,
      listKey: this.listKeyOf(client, authorization),
      credentials: key === GATEWAY_KEY
        ? sessionCredentials(this.#ownCredentials, undefined, undefined)
        : sessionCredentials(this.credentials, client.principal, this.#callerTokens),
      events: upstreamSessionEvents(this, this.#events, this.#log, (session) => { this.#closed(session) }),
      log: this.#log,
      prior: this.#prior,
      signal: this.#closing.signal,
    })
    if (key !== GATEWAY_KEY) this.#log.debug({ session: key }, 'upstream session opened')
    return session
  }

  #closed (session: UpstreamSession): void {
    if (session === this.#gateway) {
      if (this.state === 'ready') this.#markDown('connection closed')
    } else {
      this.#perCall.forget(session)
      if (this.#clients.remove(session) && !session.ended && this.state !== 'closed') this.#log.info({ session: session.key }, 'upstream session closed')
    }
    this.#events.onSessionClosed(this, session)
  }

  /** Closes a session nobody needs any more (it leaves the idle per-call sessions and the pool at once). */
  #retire (session: UpstreamSession): void {
    this.#perCall.forget(session)
    this.#clients.remove(session)
    void session.close()
  }

  /** The pool took an idle session back to make room for another. */
  #evict (session: UpstreamSession): void {
    this.#log.info({ session: session.key, idleMs: Date.now() - session.lastUsedAt }, 'closed an idle upstream session to make room for another')
    this.#retire(session)
  }

  #markDown (reason: string): void {
    if (this.state === 'closed') return
    const wasReady = this.state === 'ready'
    // One warning per change of state or of reason: retries that fail as the last one did log at debug.
    const again = this.state === 'down' && this.lastError === reason
    this.state = 'down'
    this.lastError = reason
    const gateway = this.#gateway
    this.#gateway = undefined
    void gateway?.close()
    this.slots.rejectAll(this.#unavailable())
    for (const idle of this.#perCall.drain()) void idle.close()
    const delay = Math.min(this.config.restart.maxDelay, this.config.restart.initialDelay * 2 ** this.#attempt++)
    if (again) this.#log.debug({ reason, retryInMs: delay }, 'upstream still unavailable')
    else this.#log.warn({ reason, retryInMs: delay }, wasReady ? 'upstream went down' : 'upstream unavailable')
    if (wasReady) this.#events.onDown(this, reason)
    this.reconnects++
    this.#reconnectTimer = setTimeout(() => { void this.#connect() }, delay)
    this.#reconnectTimer.unref()
  }

  #reapIdle (): void {
    const cutoff = Date.now() - this.config.idleTimeout
    for (const session of [...this.#perCall.idle, ...this.#clients.values()]) {
      if (session.holds === 0 && session.lastUsedAt < cutoff) {
        this.#log.info({ session: session.key, idleMs: Date.now() - session.lastUsedAt }, 'closed an idle upstream session')
        this.#retire(session)
      }
    }
  }

  #unavailable (): GatewayError {
    return new GatewayError('GW_ERR_UPSTREAM_UNAVAILABLE', [this.name, this.lastError ?? this.state])
  }
}
