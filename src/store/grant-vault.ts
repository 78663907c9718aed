/**
 * What renews a principal's upstream token for work that no longer has its caller (a task resumed by another
 * process, or after a restart): the refresh token the authorization server gave for that principal and
 * upstream, with the server and client it belongs to, sealed before it reaches the store.
 *
 * Sealing is AES-256-GCM under a key derived by HKDF-SHA256 from `server.stateSecret` (a label of its own: the
 * key seals nothing else), with a fresh 96-bit IV per record and the record's identity (principal and upstream)
 * as associated data: the store holds no token in clear, and a record copied to another principal's or
 * upstream's place, altered, or sealed under another secret does not open (it is then ignored, never used).
 *
 * Without `server.stateSecret` nothing can be sealed for another process or the next start: grants are then
 * kept in this process's memory only (sealed under a random key), and `openGrantVault` says so at start.
 */
import { randomBytes } from 'node:crypto'
import type { Logger } from '../observability/logger.ts'
import { shownPrincipal } from '../observability/logger.ts'
import { MemoryGrantStore } from './memory/memory-grants.ts'
import { openText, sealText, sealingKey } from './sealed-text.ts'
import type { GatewayStore, GrantStore } from './types.ts'

/** The HKDF label of the sealing key; a change of the sealed format takes the next version. */
const KEY_LABEL = 'mcp-task-gateway upstream grant sealing key v1'
/** The format of a sealed record, in its associated data. */
const FORMAT = 1
/** How long a grant is kept after its last write (an exchange or a refresh), by default: tasks.maxTtl's default. */
export const DEFAULT_GRANT_TTL_MS = 24 * 60 * 60 * 1000

/** The key grants are sealed with, the same in every process that shares `server.stateSecret`. */
export function grantKey (secret: string): Buffer {
  return sealingKey(secret, KEY_LABEL)
}

/** What renews one principal's token for one upstream without the caller. */
export interface UpstreamGrant {
  /** The authorization server that issued the refresh token: it is sent to no other. */
  readonly issuer: string
  /** The OAuth client of the gateway it was issued to. */
  readonly clientId: string
  readonly refreshToken: string
}

/** A grant as read from the store, with the sealed text it came from (what `forget` deletes). */
export interface HeldGrant extends UpstreamGrant {
  readonly sealed: string
}

export interface GrantVaultOptions {
  /** Where the sealed records go. */
  readonly store: GrantStore
  /** The sealing key (grantKey()). */
  readonly key: Buffer
  /** Whether `store` outlives this process and is read by the others (false: memory only). */
  readonly persistent: boolean
  /** How long a grant is kept after its last write (default DEFAULT_GRANT_TTL_MS). */
  readonly ttlMs?: number | undefined
  /** The clock, epoch ms (tests move it). */
  readonly now?: (() => number) | undefined
  /** Hears what could not be stored or opened (never what a grant holds). */
  readonly log?: Logger | undefined
}

/** The record's identity, authenticated with it: a record opens only where it was written. */
function identity (principal: string, upstream: string): Buffer {
  return Buffer.from(JSON.stringify(['grant', FORMAT, principal, upstream]), 'utf8')
}

function isGrant (value: unknown): value is UpstreamGrant {
  const grant = value as Partial<UpstreamGrant> | null
  return typeof grant === 'object' && grant !== null && typeof grant.issuer === 'string' &&
    typeof grant.clientId === 'string' && typeof grant.refreshToken === 'string'
}

export class GrantVault {
  readonly persistent: boolean
  readonly #store: GrantStore
  readonly #key: Buffer
  readonly #ttlMs: number
  readonly #now: () => number
  readonly #log: Logger | undefined

  constructor (options: GrantVaultOptions) {
    if (options.key.length !== 32) throw new TypeError('a grant sealing key has 32 bytes')
    this.persistent = options.persistent
    this.#store = options.store
    this.#key = options.key
    this.#ttlMs = options.ttlMs ?? DEFAULT_GRANT_TTL_MS
    this.#now = options.now ?? Date.now
    this.#log = options.log
  }

  /** `grant` sealed for `principal` and `upstream`: base64url of format, IV, tag and ciphertext. */
  seal (principal: string, upstream: string, grant: UpstreamGrant): string {
    const plain = JSON.stringify({ issuer: grant.issuer, clientId: grant.clientId, refreshToken: grant.refreshToken })
    return sealText(this.#key, identity(principal, upstream), plain)
  }

  /** The grant `sealed` holds, or undefined when it does not open for `principal` and `upstream` under this key. */
  open (principal: string, upstream: string, sealed: string): UpstreamGrant | undefined {
    const plain = openText(this.#key, identity(principal, upstream), sealed)
    if (plain === undefined) return undefined
    try {
      const grant: unknown = JSON.parse(plain)
      return isGrant(grant) ? { issuer: grant.issuer, clientId: grant.clientId, refreshToken: grant.refreshToken } : undefined
    } catch {
      return undefined
    }
  }

  /**
   * Stores `grant` for `principal` and `upstream` (replacing the one there: the latest wins). A store that
   * refuses the write is logged, not thrown: the caller's own call goes on, and only resumed work loses the grant.
   */
  async save (principal: string, upstream: string, grant: UpstreamGrant): Promise<boolean> {
    const sealed = this.seal(principal, upstream, grant)
    try {
      await this.#store.put({ principal, upstream, sealed, expiresAt: this.#now() + this.#ttlMs })
      return true
    } catch (err) {
      this.#log?.warn({ upstream, principal: shownPrincipal(principal), code: (err as { code?: unknown }).code },
        'a grant that renews an upstream token for resumed work could not be stored; work resumed without its caller may be refused')
      return false
    }
  }

  /**
   * The grant stored for `principal` and `upstream`, or undefined when there is none, it expired, or it does not
   * open (another `server.stateSecret`, a record moved or altered: logged, left to expire). Throws the store's error.
   */
  async load (principal: string, upstream: string): Promise<HeldGrant | undefined> {
    const record = await this.#store.get(principal, upstream, this.#now())
    if (record === null) return undefined
    const grant = this.open(principal, upstream, record.sealed)
    if (grant === undefined) {
      this.#log?.warn({ upstream, principal: shownPrincipal(principal) },
        'a stored grant for resumed work does not open (sealed under another server.stateSecret, or not written for this principal and upstream); it is not used')
      return undefined
    }
    return { ...grant, sealed: record.sealed }
  }

  /**
   * Deletes the grant of `principal` and `upstream` (the authorization server refused it); with `held`, only
   * while the store still holds that one, so a newer grant another process wrote stays. Never throws.
   */
  async forget (principal: string, upstream: string, held?: HeldGrant): Promise<void> {
    try {
      await this.#store.delete(principal, upstream, held?.sealed)
    } catch (err) {
      this.#log?.warn({ upstream, principal: shownPrincipal(principal), code: (err as { code?: unknown }).code },
        'a refused grant could not be deleted from the store; it expires by itself')
    }
  }
}

export interface OpenGrantVaultOptions {
  readonly ttlMs?: number | undefined
  readonly now?: (() => number) | undefined
  readonly log?: Logger | undefined
}

/**
 * The vault of a gateway: sealed into `store` under a key from `stateSecret`; without one, in this process's
 * memory only, which on a durable store is logged once as a warning (a task resumed after a restart then
 * cannot renew its upstream token). Made once at start, when an upstream renews tokens for resumed work.
 */
export function openGrantVault (store: GatewayStore, stateSecret: string | undefined, options: OpenGrantVaultOptions = {}): GrantVault {
  const common = { ttlMs: options.ttlMs, now: options.now, log: options.log }
  if (stateSecret !== undefined) {
    return new GrantVault({ ...common, store: store.grants, key: grantKey(stateSecret), persistent: store.durable })
  }
  if (store.durable) {
    options.log?.warn('server.stateSecret is not set: the grants that renew upstream tokens for tasks resumed without their caller are kept ' +
      'in memory only, so a task resumed after a restart cannot get a token for its upstream; set server.stateSecret to keep them, encrypted, in the store')
  }
  return new GrantVault({ ...common, store: new MemoryGrantStore(), key: randomBytes(32), persistent: false })
}
