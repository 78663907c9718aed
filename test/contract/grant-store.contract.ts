import { randomBytes, randomUUID } from 'node:crypto'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { GrantVault, grantKey, type UpstreamGrant } from '../../src/store/grant-vault.ts'
import type { GatewayStore, GrantRecord } from '../../src/store/types.ts'

/** One backend as two gateway processes (or two starts of one) see it. */
export interface GrantBackend {
  /** The store of the first process. */
  readonly first: GatewayStore
  /**
   * Another store on the same backend: another process's (Redis, PostgreSQL), the next start's on the same file
   * (SQLite: `first` is closed first, one process per file), or the same one (memory).
   */
  next (): Promise<GatewayStore>
  /** Everything the backend holds now, as text (the file's bytes, every value under the prefix, every row); none for memory. */
  readonly raw?: (() => Promise<string>) | undefined
  /** Closes what is open and deletes what the backend holds. */
  close (): Promise<void>
}

const SECRET = 'the state secret every process of the test shares'
const T0 = Date.now()

function record (overrides: Partial<GrantRecord> = {}): GrantRecord {
  return { principal: `principal:${randomUUID()}`, upstream: 'remote', sealed: randomBytes(48).toString('base64url'), expiresAt: T0 + 60_000, ...overrides }
}

/** A grant as an authorization server would make one: an opaque refresh token nobody could guess. */
function grant (): UpstreamGrant {
  return { issuer: 'https://as.example/', clientId: 'gateway', refreshToken: randomBytes(32).toString('base64url') }
}

function vaultOn (store: GatewayStore, secret = SECRET): GrantVault {
  return new GrantVault({ store: store.grants, key: grantKey(secret), persistent: true, now: () => T0 })
}

/**
 * The sealed grants that renew a principal's upstream token for work resumed without its caller: one record per
 * principal and upstream, read by another process or the next start, the latest write winning, gone at its
 * expiry; and, sealed by the vault, never holding a token in clear nor opening under another key or in another place.
 */
export function grantStoreContract (name: string, open: () => Promise<GrantBackend>): void {
  describe(`store contract (grants): ${name}`, () => {
    let backend: GrantBackend

    beforeEach(async () => {
      backend = await open()
    })

    afterEach(async () => {
      await backend.close()
    })

    it('gives another process the record one wrote, the latest write of a principal and upstream winning', async () => {
      const first = record()
      const latest = record({ principal: first.principal, expiresAt: T0 + 120_000 })
      const otherUpstream = record({ principal: first.principal, upstream: 'other' })
      await backend.first.grants.put(first)
      await backend.first.grants.put(latest)
      await backend.first.grants.put(otherUpstream)
      const next = await backend.next()
      expect(await next.grants.get(first.principal, 'remote', T0)).toEqual(latest)
      expect(await next.grants.get(first.principal, 'other', T0)).toEqual(otherUpstream)
      expect(await next.grants.get(`principal:${randomUUID()}`, 'remote', T0)).toBeNull()
    })

    it('reads no record at or after its expiry, and the sweep deletes exactly the expired ones', async () => {
      const [expiring, lasting] = [record({ expiresAt: T0 + 60_000 }), record({ expiresAt: T0 + 120_000 })]
      const grants = backend.first.grants
      await grants.put(expiring)
      await grants.put(lasting)
      expect(await grants.get(expiring.principal, 'remote', T0 + 59_999)).toEqual(expiring)
      expect(await grants.get(expiring.principal, 'remote', T0 + 60_000)).toBeNull()
      expect(await grants.sweep(T0 + 60_000)).toBe(1)
      expect(await grants.sweep(T0 + 60_000)).toBe(0)
      expect(await grants.get(expiring.principal, 'remote', T0)).toBeNull()
      expect(await grants.get(lasting.principal, 'remote', T0 + 60_000)).toEqual(lasting)
      // A record written again after it was due for the sweep lives to its new expiry.
      await grants.put({ ...expiring, expiresAt: T0 + 180_000 })
      expect(await grants.sweep(T0 + 120_000)).toBe(1)
      expect(await grants.get(expiring.principal, 'remote', T0 + 120_000)).toMatchObject({ expiresAt: T0 + 180_000 })
    })

    it('deletes a record named by its sealed text only while it holds that text, and any record without it', async () => {
      const older = record()
      const newer = { ...older, sealed: randomBytes(48).toString('base64url') }
      const grants = backend.first.grants
      await grants.put(older)
      await grants.put(newer)
      // A process whose refresh was refused deletes what it read; another process's newer grant stays.
      expect(await grants.delete(older.principal, 'remote', older.sealed)).toBe(false)
      expect(await grants.get(older.principal, 'remote', T0)).toEqual(newer)
      expect(await grants.delete(older.principal, 'remote', newer.sealed)).toBe(true)
      expect(await grants.get(older.principal, 'remote', T0)).toBeNull()
      await grants.put(older)
      expect(await grants.delete(older.principal, 'remote')).toBe(true)
      expect(await grants.delete(older.principal, 'remote')).toBe(false)
    })

    it('stores a sealed grant that another process opens with the same secret, and never the token in clear', async () => {
      const principal = `principal:${randomUUID()}`
      const held = grant()
      expect(await vaultOn(backend.first).save(principal, 'remote', held)).toBe(true)
      const stored = await backend.first.grants.get(principal, 'remote', T0)
      expect(stored?.sealed).not.toContain(held.refreshToken)
      expect(Buffer.from(stored!.sealed, 'base64url').toString('latin1')).not.toContain(held.refreshToken)
      if (backend.raw !== undefined) {
        const raw = await backend.raw()
        // The raw bytes are those of this backend: the sealed text is there, the token is not.
        expect(raw).toContain(stored!.sealed)
        expect(raw).not.toContain(held.refreshToken)
      }
      const next = await backend.next()
      expect(await vaultOn(next).load(principal, 'remote')).toEqual({ ...held, sealed: stored!.sealed })
    })

    it('opens no grant under another secret, moved to another principal or upstream, or altered, and says no cleanly', async () => {
      const principal = `principal:${randomUUID()}`
      const vault = vaultOn(backend.first)
      await vault.save(principal, 'remote', grant())
      const stored = (await backend.first.grants.get(principal, 'remote', T0))!
      const mallory = `principal:${randomUUID()}`
      await backend.first.grants.put({ ...stored, principal: mallory })
      await backend.first.grants.put({ ...stored, upstream: 'other' })
      const bytes = Buffer.from(stored.sealed, 'base64url')
      bytes[bytes.length - 1]! ^= 1
      const altered = `principal:${randomUUID()}`
      await backend.first.grants.put({ ...stored, principal: altered, sealed: bytes.toString('base64url') })
      await backend.first.grants.put({ ...stored, principal: `${altered}-short`, sealed: 'AQ' })

      const next = await backend.next()
      expect(await vaultOn(next, 'another secret, of another deployment').load(principal, 'remote')).toBeUndefined()
      const same = vaultOn(next)
      expect(await same.load(mallory, 'remote')).toBeUndefined()
      expect(await same.load(principal, 'other')).toBeUndefined()
      expect(await same.load(altered, 'remote')).toBeUndefined()
      expect(await same.load(`${altered}-short`, 'remote')).toBeUndefined()
      // The grant in its own place still opens.
      expect(await same.load(principal, 'remote')).toMatchObject({ clientId: 'gateway' })
    })
  })
}
