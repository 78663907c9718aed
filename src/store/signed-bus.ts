import { createHmac, createSecretKey, hkdfSync, randomBytes, timingSafeEqual, type KeyObject } from 'node:crypto'
import type { JsonObject } from '../wire/jsonrpc.ts'
import { checkBusPayload } from './bus-channels.ts'
import type { Logger } from '../observability/logger.ts'
import type { BusHandler, GatewayStore, SignalBus } from './types.ts'

/** Why a message on a shared bus was refused (the label of gateway_bus_refusals_total). */
export type BusRefusal = 'unsigned' | 'bad_mac' | 'stale' | 'replayed' | 'malformed'

/** The version of the envelope; a change of its fields or of what the MAC covers takes the next one. */
const ENVELOPE_VERSION = 1
/** The HKDF label of the bus key: the key signs nothing else (requestStates have their own). */
const KEY_LABEL = 'mcp-task-gateway bus signing key v1'
/** Default age bound of a message, clock skew between the machines included. */
export const BUS_MAX_AGE_MS = 30_000

/** The key every process sharing the store derives from `server.stateSecret`: HKDF-SHA256, its own label. */
export function busKey (secret: string): Buffer {
  return Buffer.from(hkdfSync('sha256', Buffer.from(secret, 'utf8'), Buffer.alloc(0), KEY_LABEL, 32))
}

export interface SignedBusOptions {
  /** The key from busKey(). */
  key: Buffer
  /** Messages whose time is further than this from the receiver's clock, either way, are refused as stale. */
  maxAgeMs?: number
  /** Told of every refusal, with the channel it came on (metrics, log). */
  refused: (reason: BusRefusal, channel: string) => void
}

/**
 * What travels on the raw bus: the payload as JSON text, so the MAC covers the exact bytes the receiver
 * parses. `mac` is HMAC-SHA256 over the version, the channel, `ts`, `nonce` and `payload`: a message
 * signed for one channel does not verify on another.
 */
interface Envelope {
  v: number
  ts: number
  nonce: string
  payload: string
  mac: string
}

function isEnvelope (message: JsonObject): boolean {
  return typeof message === 'object' && message !== null && 'mac' in message && 'payload' in message && 'nonce' in message && 'ts' in message && 'v' in message
}

/**
 * A signal bus shared by several processes, in which a process trusts only what it can verify: every
 * message is sent in a signed envelope (version, time, nonce, payload, MAC under a key derived from
 * `server.stateSecret`), and a message that is unsigned, signed with another key, altered, older (or
 * newer) than the age bound, seen before, or whose payload fails its channel's schema is refused,
 * reported, and never reaches a handler. Nonces are remembered for twice the age bound, long enough for any
 * message carrying one to be stale by then.
 */
export class SignedBus implements SignalBus {
  readonly #raw: SignalBus
  /** A KeyObject: each HMAC then skips importing the key again. */
  readonly #key: KeyObject
  readonly #maxAgeMs: number
  readonly #refused: (reason: BusRefusal, channel: string) => void
  /** Unique per process without a random draw per message: a random prefix and a counter. */
  readonly #noncePrefix = randomBytes(9).toString('base64url')
  #counter = 0
  /** Nonces seen, with when they may be forgotten; in the order they were seen, so also by that time. */
  readonly #seen = new Map<string, number>()
  /** Each subscribed handler, by channel, and the verifying handler subscribed on the raw bus for it. */
  readonly #handlers = new Map<string, { handlers: Set<BusHandler>, unsubscribe: () => void }>()

  constructor (raw: SignalBus, options: SignedBusOptions) {
    this.#raw = raw
    this.#key = createSecretKey(options.key)
    this.#maxAgeMs = options.maxAgeMs ?? BUS_MAX_AGE_MS
    this.#refused = options.refused
  }

  async publish (channel: string, message: JsonObject): Promise<number> {
    return await this.#raw.publish(channel, this.seal(channel, message) as unknown as JsonObject)
  }

  subscribe (channel: string, handler: BusHandler): () => void {
    let entry = this.#handlers.get(channel)
    if (!entry) {
      const handlers = new Set<BusHandler>()
      const unsubscribe = this.#raw.subscribe(channel, (message) => {
        const payload = this.open(channel, message)
        if (payload === undefined) return
        for (const each of [...handlers]) each(payload)
      })
      entry = { handlers, unsubscribe }
      this.#handlers.set(channel, entry)
    }
    entry.handlers.add(handler)
    return () => {
      const current = this.#handlers.get(channel)
      if (!current?.handlers.delete(handler) || current.handlers.size > 0) return
      this.#handlers.delete(channel)
      current.unsubscribe()
    }
  }

  async subscribed (): Promise<void> {
    await this.#raw.subscribed()
  }

  /** How many nonces are remembered (they are forgotten after twice the age bound). */
  get remembered (): number {
    return this.#seen.size
  }

  /** The envelope of `message` on `channel`, as published. */
  seal (channel: string, message: JsonObject, now = Date.now()): Envelope {
    const payload = JSON.stringify(message)
    const nonce = `${this.#noncePrefix}${(this.#counter++).toString(36)}`
    return { v: ENVELOPE_VERSION, ts: now, nonce, payload, mac: this.#mac(channel, now, nonce, payload) }
  }

  /** The payload of a message received on `channel`, or undefined when it is refused (and reported). */
  open (channel: string, message: JsonObject): JsonObject | undefined {
    if (!isEnvelope(message)) return this.#refuse('unsigned', channel)
    const { v, ts, nonce, payload, mac } = message
    if (v !== ENVELOPE_VERSION || typeof ts !== 'number' || typeof nonce !== 'string' || typeof payload !== 'string' || typeof mac !== 'string') {
      return this.#refuse('malformed', channel)
    }
    const given = Buffer.from(mac, 'base64url')
    const expected = Buffer.from(this.#mac(channel, ts, nonce, payload), 'base64url')
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return this.#refuse('bad_mac', channel)
    const now = Date.now()
    if (Math.abs(now - ts) > this.#maxAgeMs) return this.#refuse('stale', channel)
    this.#forgetOld(now)
    if (this.#seen.has(nonce)) return this.#refuse('replayed', channel)
    this.#seen.set(nonce, now + 2 * this.#maxAgeMs)
    let parsed: unknown
    try {
      parsed = JSON.parse(payload)
    } catch {
      // Not JSON: refused just below as malformed.
    }
    if (!checkBusPayload(channel, parsed)) return this.#refuse('malformed', channel)
    return parsed as JsonObject
  }

  #mac (channel: string, ts: number, nonce: string, payload: string): string {
    return createHmac('sha256', this.#key).update(`${ENVELOPE_VERSION}\n${channel}\n${ts}\n${nonce}\n`).update(payload).digest('base64url')
  }

  #forgetOld (now: number): void {
    for (const [nonce, until] of this.#seen) {
      if (until > now) return
      this.#seen.delete(nonce)
    }
  }

  #refuse (reason: BusRefusal, channel: string): undefined {
    this.#refused(reason, channel)
    return undefined
  }
}

/** Shortest time between two log lines about refused messages; the counter has every one. */
const REFUSAL_LOG_INTERVAL_MS = 10_000

/** The name of a bus channel without its key (`peer.v1:<process id>` → `peer.v1`): a bounded metrics label. */
export function channelLabel (wire: string): string {
  const colon = wire.indexOf(':')
  return colon < 0 ? wire : wire.slice(0, colon)
}

/**
 * What is done with a refused message: counted (`count`, every one) and logged at warn, at most one line per
 * 10 s, which says how many were refused since the line before.
 */
export function refusalReporter (log: Logger, count: (reason: BusRefusal, channel: string) => void): SignedBusOptions['refused'] {
  let loggedAt = -Infinity
  let since = 0
  return (reason, wire) => {
    const channel = channelLabel(wire)
    count(reason, channel)
    since++
    const now = Date.now()
    if (now - loggedAt < REFUSAL_LOG_INTERVAL_MS) return
    log.warn({ reason, channel, refused: since }, 'refused a message from the bus between gateway processes (see gateway_bus_refusals_total): is something else writing to the store?')
    loggedAt = now
    since = 0
  }
}

/** `store` with its bus signed (a shared store's); every other part is the store's own. */
export function withSignedBus (store: GatewayStore, options: SignedBusOptions): GatewayStore {
  const bus = new SignedBus(store.bus, options)
  return {
    kind: store.kind,
    shared: store.shared,
    durable: store.durable,
    sessions: store.sessions,
    tasks: store.tasks,
    bus,
    leases: store.leases,
    homes: store.homes,
    rateLimits: store.rateLimits,
    grants: store.grants,
    health: async () => await store.health(),
    close: async () => await store.close(),
  }
}
