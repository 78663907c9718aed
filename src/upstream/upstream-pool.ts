import type { ClientCapabilities, PriorDiscovery } from '@modelcontextprotocol/client'
import type { UpstreamConfig } from '../config/schema.ts'
import { GatewayError, errorMessage } from '../errors.ts'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import type { Logger } from '../observability/logger.ts'
import { createUpstreamHttp, type UpstreamHttp } from './http-dispatcher.ts'
import { UpstreamConnection, connectionSignature, type ConnectionEvents } from './upstream-connection.ts'

export type UpstreamState = 'starting' | 'ready' | 'down' | 'closed'

export interface UpstreamPoolEvents {
  onReady (pool: UpstreamPool): void
  /** The upstream was ready and is not any more. */
  onDown (pool: UpstreamPool, reason: string): void
  onListChanged (pool: UpstreamPool, kind: 'tools' | 'prompts' | 'resources'): void
  onResourceUpdated (pool: UpstreamPool, params: JsonObject): void
}

/** An exclusive hold on one upstream connection for the whole life of one call. */
export interface Lease {
  readonly connection: UpstreamConnection
  release (): void
}

interface Waiter {
  capabilities: ClientCapabilities
  authorization: string | undefined
  signature: string
  resolve (lease: Lease): void
  reject (err: unknown): void
}

/**
 * The connections to one upstream: a shared one for reads, list changes and subscriptions, and up to
 * `maxConcurrentCalls` exclusive ones leased to calls, so every server→client request an upstream sends
 * belongs to exactly one call. Exclusive connections declare the capabilities of the call's client.
 */
export class UpstreamPool {
  readonly config: UpstreamConfig
  state: UpstreamState = 'starting'
  lastError: string | undefined
  readonly #log: Logger
  readonly #events: UpstreamPoolEvents
  readonly #http: UpstreamHttp | undefined
  #shared: UpstreamConnection | undefined
  #prior: PriorDiscovery | undefined
  readonly #idle: UpstreamConnection[] = []
  readonly #waiters: Waiter[] = []
  #held = 0
  #attempt = 0
  #reconnectTimer: NodeJS.Timeout | undefined
  readonly #reaper: NodeJS.Timeout

  constructor (config: UpstreamConfig, log: Logger, events: UpstreamPoolEvents) {
    this.config = config
    this.#log = log.child({ upstream: config.name })
    this.#events = events
    this.#http = config.transport === 'stdio' ? undefined : createUpstreamHttp(config)
    this.#reaper = setInterval(() => this.#reapIdle(), Math.max(1000, Math.floor(config.idleTimeout / 2)))
    this.#reaper.unref()
  }

  get name (): string {
    return this.config.name
  }

  /** Calls holding or opening a connection right now, and calls waiting for one. */
  get load (): { active: number, idle: number, waiting: number } {
    return { active: this.#held, idle: this.#idle.length, waiting: this.#waiters.length }
  }

  /** Connects the shared connection; never throws: a failure marks the upstream down and retries with backoff. */
  async start (): Promise<void> {
    if (this.state === 'closed') return
    try {
      const connection = await this.#open({}, this.#sharedEvents())
      if ((this.state as UpstreamState) === 'closed') {
        await connection.close()
        return
      }
      const era = connection.client.getProtocolEra?.()
      const discover = connection.client.getDiscoverResult?.()
      this.#prior = era === 'modern' && discover ? { kind: 'modern', discover } : { kind: 'legacy' }
      this.#shared = connection
      this.#attempt = 0
      this.state = 'ready'
      this.lastError = undefined
      this.#log.info({ era, protocolVersion: connection.client.getNegotiatedProtocolVersion?.() }, 'upstream connected')
      this.#events.onReady(this)
    } catch (err) {
      this.#markDown(`connect failed: ${errorMessage(err)}`)
    }
  }

  /** The shared connection for reads; throws GW_ERR_UPSTREAM_UNAVAILABLE when the upstream is down. */
  shared (): UpstreamConnection {
    if (this.state === 'ready' && this.#shared && !this.#shared.closed) return this.#shared
    throw this.#unavailable()
  }

  /**
   * Waits for an exclusive connection declaring `capabilities`. With `authorization` (a caller's own
   * header, for forwardAuthorization) the connection sends it on every request and serves only that caller.
   */
  lease (capabilities: ClientCapabilities, signal?: AbortSignal, authorization?: string): Promise<Lease> {
    if (this.state === 'closed') return Promise.reject(new GatewayError('GW_ERR_SHUTTING_DOWN'))
    if (this.state !== 'ready') return Promise.reject(this.#unavailable())
    return new Promise<Lease>((resolve, reject) => {
      const waiter: Waiter = { capabilities, authorization, signature: connectionSignature(capabilities, authorization), resolve, reject }
      if (this.#tryGrant(waiter)) return
      if (this.#waiters.length >= this.config.maxQueuedCalls) {
        reject(new GatewayError('GW_ERR_UPSTREAM_BUSY', [this.name, this.#waiters.length]))
        return
      }
      this.#waiters.push(waiter)
      signal?.addEventListener('abort', () => {
        const index = this.#waiters.indexOf(waiter)
        if (index >= 0) {
          this.#waiters.splice(index, 1)
          reject(signal.reason)
        }
      }, { once: true })
    })
  }

  async close (): Promise<void> {
    this.state = 'closed'
    clearTimeout(this.#reconnectTimer)
    clearInterval(this.#reaper)
    for (const waiter of this.#waiters.splice(0)) waiter.reject(new GatewayError('GW_ERR_SHUTTING_DOWN'))
    const all = [...this.#idle.splice(0), ...(this.#shared ? [this.#shared] : [])]
    this.#shared = undefined
    await Promise.all(all.map((c) => c.close()))
    await this.#http?.close()
  }

  #tryGrant (waiter: Waiter): boolean {
    const index = this.#idle.findIndex((c) => c.signature === waiter.signature && !c.closed)
    if (index >= 0) {
      const [connection] = this.#idle.splice(index, 1)
      this.#held++
      waiter.resolve(this.#leaseOf(connection!))
      return true
    }
    if (this.#held + this.#idle.length >= this.config.maxConcurrentCalls) {
      if (this.#idle.length === 0 || this.#held >= this.config.maxConcurrentCalls) return false
      void this.#idle.shift()?.close()
    }
    this.#held++
    this.#open(waiter.capabilities, this.#callEvents(), waiter.authorization).then(
      (connection) => waiter.resolve(this.#leaseOf(connection)),
      (err: unknown) => {
        this.#held--
        waiter.reject(new GatewayError('GW_ERR_UPSTREAM_UNAVAILABLE', [this.name, errorMessage(err)], { cause: err }))
        this.#drain()
      },
    )
    return true
  }

  #leaseOf (connection: UpstreamConnection): Lease {
    let released = false
    return {
      connection,
      release: () => {
        if (released) return
        released = true
        connection.bind(undefined)
        this.#held--
        if (!connection.closed && this.state === 'ready') this.#idle.push(connection)
        else void connection.close()
        this.#drain()
      },
    }
  }

  #drain (): void {
    while (this.#waiters.length > 0 && this.state === 'ready') {
      if (!this.#tryGrant(this.#waiters[0]!)) return
      this.#waiters.shift()
    }
  }

  #open (capabilities: ClientCapabilities, events: ConnectionEvents, authorization?: string): Promise<UpstreamConnection> {
    return UpstreamConnection.open({ config: this.config, http: this.#http, capabilities, events, log: this.#log, prior: this.#prior, ...(authorization !== undefined && { authorization }) })
  }

  #sharedEvents (): ConnectionEvents {
    return {
      onListChanged: (kind) => this.#events.onListChanged(this, kind),
      onResourceUpdated: (params) => this.#events.onResourceUpdated(this, params),
      onClosed: (connection) => {
        if (connection === this.#shared && this.state === 'ready') this.#markDown('connection closed')
      },
    }
  }

  #callEvents (): ConnectionEvents {
    return {
      // A change announced on a call's connection is still a change of the upstream's lists.
      onListChanged: (kind) => this.#events.onListChanged(this, kind),
      onResourceUpdated: () => {},
      onClosed: (connection) => {
        const index = this.#idle.indexOf(connection)
        if (index >= 0) this.#idle.splice(index, 1)
      },
    }
  }

  #markDown (reason: string): void {
    if (this.state === 'closed') return
    const wasReady = this.state === 'ready'
    this.state = 'down'
    this.lastError = reason
    const shared = this.#shared
    this.#shared = undefined
    void shared?.close()
    for (const waiter of this.#waiters.splice(0)) waiter.reject(this.#unavailable())
    for (const idle of this.#idle.splice(0)) void idle.close()
    const delay = Math.min(this.config.restart.maxDelay, this.config.restart.initialDelay * 2 ** this.#attempt++)
    this.#log.warn({ reason, retryInMs: delay }, wasReady ? 'upstream went down' : 'upstream unavailable')
    if (wasReady) this.#events.onDown(this, reason)
    this.#reconnectTimer = setTimeout(() => { void this.start() }, delay)
    this.#reconnectTimer.unref()
  }

  #reapIdle (): void {
    const cutoff = Date.now() - this.config.idleTimeout
    for (let i = this.#idle.length - 1; i >= 0; i--) {
      const connection = this.#idle[i]!
      if (connection.lastUsedAt < cutoff) {
        this.#idle.splice(i, 1)
        void connection.close()
      }
    }
  }

  #unavailable (): GatewayError {
    return new GatewayError('GW_ERR_UPSTREAM_UNAVAILABLE', [this.name, this.lastError ?? this.state])
  }
}
