import { readFileSync } from 'node:fs'
import { Redis, type RedisOptions } from 'ioredis'
import { GatewayError } from '../../errors.ts'
import type { Logger } from '../../observability/logger.ts'
import type { JsonObject } from '../../wire/jsonrpc.ts'
import type { BusHandler, GatewayStore, LeaseStore, SessionCreateOptions, SessionRecord, SessionStore, SignalBus, StoreHealth } from '../types.ts'
import { guarded } from './redis-errors.ts'
import { CREATE_SESSION, REMOVE_SESSIONS, run, TOUCH_SESSION } from './redis-scripts.ts'
import { sessionBytes } from '../stored-bytes.ts'
import { RedisTaskStore } from './redis-task-store.ts'
import { RedisRateLimits } from './redis-rate-limits.ts'
import { RedisHomeStore } from './redis-homes.ts'
import { RedisGrantStore } from './redis-grants.ts'
import { RedisHealth } from './redis-health.ts'
import { RedisEpoch } from './redis-epoch.ts'
import { migrateRevisions } from './redis-revisions.ts'
import { ignoreWithTrace, settled } from '../../observability/ignored.ts'

/** Longest wait for a connection or a command before Redis counts as unreachable. */
const TIMEOUT_MS = 5000
/** Longest pause between reconnection attempts, so the store is back soon after Redis is. */
const MAX_RECONNECT_DELAY_MS = 2000
/** Sessions deleted per script run, so that Redis is never blocked for long. */
const REMOVE_BATCH = 500
/** Channels per SUBSCRIBE when a new connection takes every channel again (one per running task). */
const RESUBSCRIBE_BATCH = 1000

function readCa (file: string): Buffer {
  try {
    return readFileSync(file)
  } catch (err) {
    throw new GatewayError('GW_ERR_STORE_UNAVAILABLE', [`store.caFile '${file}' cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`], { cause: err })
  }
}

export interface RedisStoreOptions {
  url: string
  prefix: string
  /** AUTH password when the url carries none. */
  password?: string
  /** PEM file of the CA that signed the server's certificate (rediss://). */
  caFile?: string
  /** Told once when the connection is lost and once when it is back. */
  log?: Logger
}

/**
 * Sessions: session:<id> (hash: body JSON, seen, principal, acct: the account it is counted under, bytes: what it
 * stores, counted in bytes:<account> with the account's tasks), `sessions`,
 * a sorted set of ids by last use, and psessions:<account>, the set of each account's session ids (for
 * limits.sessionsPerPrincipal; sessions stored before accounts existed are counted under their principal).
 */
class RedisSessionStore implements SessionStore {
  readonly #redis: Redis
  readonly #p: string

  constructor (redis: Redis, prefix: string) {
    this.#redis = redis
    this.#p = prefix
  }

  async create (session: SessionRecord, options: SessionCreateOptions = {}): Promise<void> {
    const account = options.account ?? session.principal
    const bytes = sessionBytes(session)
    const keys = [`session:${session.id}`, 'sessions', `psessions:${account}`, `bytes:${account}`].map((key) => this.#p + key)
    const refused = await run(this.#redis, CREATE_SESSION, keys, [
      session.id, JSON.stringify(session), session.lastSeenAt, session.principal, account, bytes, options.maxStoredBytes ?? '', options.maxSessions ?? '',
    ])
    if (!Array.isArray(refused)) return
    if (refused[0] === 'sessions') throw new GatewayError('GW_ERR_SESSION_LIMIT', [options.maxSessions])
    throw new GatewayError('GW_ERR_STORED_BYTES_LIMIT', [Number(refused[1]), bytes, options.maxStoredBytes])
  }

  async get (id: string): Promise<SessionRecord | null> {
    const [body, seen] = await this.#redis.hmget(`${this.#p}session:${id}`, 'body', 'seen')
    if (body === null || body === undefined) return null
    return { ...JSON.parse(body) as SessionRecord, lastSeenAt: Number(seen) }
  }

  async touch (id: string, at: number): Promise<void> {
    await run(this.#redis, TOUCH_SESSION, [`${this.#p}session:${id}`, `${this.#p}sessions`], [id, at])
  }

  async delete (id: string): Promise<boolean> {
    return (await this.#remove([id])) > 0
  }

  async sweep (before: number): Promise<string[]> {
    const ids = await this.#redis.zrangebyscore(`${this.#p}sessions`, '-inf', `(${before}`)
    if (ids.length > 0) await this.#remove(ids)
    return ids
  }

  async countOf (account: string, atMost: number): Promise<number> {
    return Math.min(atMost, await this.#redis.scard(`${this.#p}psessions:${account}`))
  }

  /** Deletes sessions, their index entries and their bytes; returns how many existed. */
  async #remove (ids: readonly string[]): Promise<number> {
    let removed = 0
    for (let i = 0; i < ids.length; i += REMOVE_BATCH) {
      removed += Number(await run(this.#redis, REMOVE_SESSIONS, [], [this.#p, ...ids.slice(i, i + REMOVE_BATCH)]))
    }
    return removed
  }
}

/** Signals over Redis pub/sub: a process subscribes to the channels it has handlers for. */
class RedisBus implements SignalBus {
  readonly #publisher: Redis
  readonly #subscriber: Redis
  readonly #p: string
  readonly #handlers = new Map<string, Set<BusHandler>>()
  /** Subscriptions Redis has not confirmed yet: a publish waits for them, so a subscriber never misses it. */
  readonly #pending = new Set<Promise<unknown>>()

  readonly #log: Logger | undefined

  constructor (publisher: Redis, subscriber: Redis, prefix: string, log?: Logger) {
    this.#log = log
    this.#publisher = publisher
    this.#subscriber = subscriber
    this.#p = prefix
    // A new connection (after Redis was unreachable) starts with no subscriptions: take every channel that
    // has handlers again, including those whose SUBSCRIBE failed during the outage.
    subscriber.on('ready', () => {
      const channels = [...this.#handlers.keys()].map((channel) => this.#channel(channel))
      for (let i = 0; i < channels.length; i += RESUBSCRIBE_BATCH) {
        this.#track(subscriber.subscribe(...channels.slice(i, i + RESUBSCRIBE_BATCH)))
      }
    })
    subscriber.on('message', (channel: string, text: string) => {
      const handlers = this.#handlers.get(channel.slice(this.#p.length + 4))
      if (!handlers) return
      // What is not a JSON object was not written by a gateway process: handed on as {}, which the signed bus
      // above refuses (and counts) as unsigned.
      let message: unknown
      try {
        message = JSON.parse(text)
      } catch {
        // Not JSON: handed on as {} below, as the comment above says.
      }
      if (typeof message !== 'object' || message === null || Array.isArray(message)) message = {}
      for (const handler of [...handlers]) handler(message as JsonObject)
    })
  }

  /** Resolves with the number of processes that received it; 0 when Redis is unreachable (signals are at most once). */
  async publish (channel: string, message: JsonObject): Promise<number> {
    if (this.#pending.size > 0) await Promise.all([...this.#pending])
    return await this.#publisher.publish(this.#channel(channel), JSON.stringify(message)).catch(() => 0)
  }

  async subscribed (): Promise<void> {
    if (this.#pending.size > 0) await Promise.all([...this.#pending])
  }

  subscribe (channel: string, handler: BusHandler): () => void {
    let handlers = this.#handlers.get(channel)
    if (!handlers) {
      handlers = new Set()
      this.#handlers.set(channel, handlers)
      this.#track(this.#subscriber.subscribe(this.#channel(channel)))
    }
    handlers.add(handler)
    return () => {
      const current = this.#handlers.get(channel)
      if (!current?.delete(handler) || current.size > 0) return
      this.#handlers.delete(channel)
      this.#subscriber.unsubscribe(this.#channel(channel)).catch(ignoreWithTrace(this.#log, 'an UNSUBSCRIBE failed; messages of the channel arriving later find no handler', { channel }))
    }
  }

  #channel (channel: string): string {
    return `${this.#p}bus:${channel}`
  }

  /** A SUBSCRIBE that publishes wait for; one that fails (Redis unreachable) is sent again on reconnection. */
  #track (subscribing: Promise<unknown>): void {
    // A failed SUBSCRIBE is sent again on reconnection (see above); publishes only wait for it to be over.
    const subscribed = settled(subscribing)
    this.#pending.add(subscribed)
    void subscribed.finally(() => this.#pending.delete(subscribed))
  }
}

/** Leases: `owners`, a sorted set of gateway process ids by the end of their lease. */
class RedisLeaseStore implements LeaseStore {
  readonly #redis: Redis
  readonly #key: string
  /** Told after each renewal: the store's epoch is checked then (see RedisEpoch). */
  readonly #renewed: () => void

  constructor (redis: Redis, prefix: string, renewed: () => void = () => {}) {
    this.#redis = redis
    this.#key = `${prefix}owners`
    this.#renewed = renewed
  }

  async renew (owner: string, until: number): Promise<void> {
    await this.#redis.zadd(this.#key, until, owner)
    this.#renewed()
  }

  async alive (owner: string, now: number): Promise<boolean> {
    const until = await this.#redis.zscore(this.#key, owner)
    return until !== null && Number(until) > now
  }

  async lapsed (now: number): Promise<string[]> {
    return await this.#redis.zrangebyscore(this.#key, '-inf', now)
  }

  async release (owner: string): Promise<void> {
    await this.#redis.zrem(this.#key, owner)
  }
}

/**
 * The shared store: several gateway processes on one Redis. Commands fail at once while Redis is
 * unreachable (no offline queue), so clients get a clear error instead of a hang; a command or a
 * connection that gets no answer within 5 s fails too. ioredis reconnects in the background (at most
 * 2 s apart) and the bus then takes its channels again.
 */
export class RedisStore implements GatewayStore {
  readonly kind = 'redis'
  readonly shared = true
  readonly durable = true
  readonly sessions: RedisSessionStore
  readonly tasks: RedisTaskStore
  readonly bus: RedisBus
  readonly leases: RedisLeaseStore
  readonly homes: RedisHomeStore
  readonly rateLimits: RedisRateLimits
  readonly grants: RedisGrantStore
  readonly #redis: Redis
  readonly #subscriber: Redis
  readonly #health: RedisHealth
  readonly #log: Logger | undefined
  readonly #epoch: RedisEpoch
  readonly dataLoss: RedisEpoch
  /** Rewrites the previous names of stored eras once (redis-revisions.ts). */
  readonly #migrate: () => Promise<void>
  #closing = false

  constructor (options: RedisStoreOptions) {
    const common: RedisOptions = {
      lazyConnect: false,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: TIMEOUT_MS,
      // Bound every command and give up on a connection that stops answering (a Redis behind a proxy
      // that lost it accepts connections and never replies): ioredis then reconnects.
      commandTimeout: TIMEOUT_MS,
      socketTimeout: TIMEOUT_MS,
      retryStrategy: (attempt) => Math.min(50 * 2 ** (attempt - 1), MAX_RECONNECT_DELAY_MS) + Math.floor(Math.random() * 100),
      ...(options.password !== undefined && { password: options.password }),
      ...(options.caFile !== undefined && { tls: { ca: readCa(options.caFile) } }),
    }
    this.#redis = new Redis(options.url, common)
    // The bus resubscribes by itself on every new connection (RedisBus), including channels whose
    // SUBSCRIBE failed while Redis was unreachable, which ioredis's own resubscription would miss.
    this.#subscriber = new Redis(options.url, { ...common, enableOfflineQueue: true, autoResubscribe: false })
    for (const connection of [this.#redis, this.#subscriber]) connection.on('error', () => {})
    if (options.log !== undefined) this.#reportOutages(options.log)
    this.#epoch = new RedisEpoch(this.#redis, options.prefix, options.log)
    this.#migrate = async () => { await migrateRevisions(this.#redis, options.prefix, options.log) }
    this.dataLoss = this.#epoch
    // A new connection may be to a Redis that restarted empty.
    this.#redis.on('ready', () => { void this.#epoch.check() })
    this.#health = new RedisHealth(this.#redis, options.prefix, options.log, () => this.#epoch.recentLoss())
    const failed = (err: unknown): void => this.#health.failed(err)
    this.sessions = guarded(new RedisSessionStore(this.#redis, options.prefix), failed)
    this.tasks = guarded(new RedisTaskStore(this.#redis, options.prefix), failed)
    this.bus = new RedisBus(this.#redis, this.#subscriber, options.prefix, options.log)
    this.#log = options.log
    this.leases = guarded(new RedisLeaseStore(this.#redis, options.prefix, () => { void this.#epoch.check() }), failed)
    this.homes = guarded(new RedisHomeStore(this.#redis, options.prefix), failed)
    this.rateLimits = guarded(new RedisRateLimits(this.#redis, options.prefix), failed)
    this.grants = guarded(new RedisGrantStore(this.#redis, options.prefix), failed)
  }

  /** Logs an outage of the command connection once when it begins and once when it ends, not per retry. */
  #reportOutages (log: Logger): void {
    let lostAt: number | undefined
    const lost = (err?: Error): void => {
      if (lostAt !== undefined || this.#closing) return
      lostAt = Date.now()
      log.warn({ err: err?.message ?? 'connection closed' }, 'Redis connection lost; requests that need the store fail until it is back')
    }
    this.#redis.on('error', lost)
    this.#redis.on('close', () => lost())
    this.#redis.on('ready', () => {
      if (lostAt === undefined) return
      log.info({ downMs: Date.now() - lostAt }, 'Redis connection restored')
      lostAt = undefined
    })
  }

  /**
   * Resolves once the command connection is up (or fails with GW_ERR_STORE_UNAVAILABLE); the eviction policy
   * is read then (an evicting one is logged) and every minute after, the store's epoch is taken (RedisEpoch), and
   * stored eras are named by revision (the first start of this version on the store: redis-revisions.ts).
   */
  async ready (): Promise<void> {
    if (this.#redis.status !== 'ready') {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new GatewayError('GW_ERR_STORE_UNAVAILABLE', [`Redis did not answer within ${TIMEOUT_MS / 1000} s`])), TIMEOUT_MS)
        this.#redis.once('ready', () => {
          clearTimeout(timer)
          resolve()
        })
      })
    }
    if (this.#closing) return
    await this.#health.start()
    await this.#epoch.start()
    await this.#migrate()
  }

  /** Redis answers and accepts a write; an evicting policy is a warning (see RedisHealth). */
  async health (): Promise<StoreHealth> {
    return await this.#health.check(this.kind)
  }

  async close (): Promise<void> {
    this.#closing = true
    this.#health.stop()
    const unclean = ignoreWithTrace(this.#log, 'a Redis connection did not quit cleanly at close; it is dropped either way')
    await Promise.all([this.#redis.quit().catch(unclean), this.#subscriber.quit().catch(unclean)])
  }
}
