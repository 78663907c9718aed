/**
 * Text sealed for whoever shares `server.stateSecret`: AES-256-GCM under a key derived by HKDF-SHA256 from the
 * secret with a label of its own (a key seals one kind of thing), a fresh 96-bit IV per text, and associated data
 * naming where the text belongs, so a sealed text copied elsewhere, altered, or sealed under another secret does
 * not open. Used for the grants that renew upstream tokens (grant-vault.ts) and for a caller's Authorization
 * header forwarded to another gateway process (cluster/home-routing.ts): neither is ever stored or sent in clear.
 *
 * Format: base64url of one format byte, the IV, the 16-byte tag and the ciphertext.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto'

const FORMAT = 1
const IV_BYTES = 12
const TAG_BYTES = 16

/** The 32-byte key of `label`, the same in every process that shares `secret`. */
export function sealingKey (secret: string, label: string): Buffer {
  return Buffer.from(hkdfSync('sha256', Buffer.from(secret, 'utf8'), Buffer.alloc(0), label, 32))
}

/** `plain` sealed under `key`, authenticated with `associated` (where it belongs). */
export function sealText (key: Buffer, associated: Buffer, plain: string): string {
  const iv = randomBytes(IV_BYTES)
  const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES })
  cipher.setAAD(associated)
  const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()])
  return Buffer.concat([Buffer.of(FORMAT), iv, cipher.getAuthTag(), body]).toString('base64url')
}

/** The text `sealed` holds, or undefined when it does not open under `key` with `associated`. */
export function openText (key: Buffer, associated: Buffer, sealed: string): string | undefined {
  const bytes = Buffer.from(sealed, 'base64url')
  if (bytes.length <= 1 + IV_BYTES + TAG_BYTES || bytes[0] !== FORMAT) return undefined
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(1, 1 + IV_BYTES), { authTagLength: TAG_BYTES })
    decipher.setAAD(associated)
    decipher.setAuthTag(bytes.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES))
    return Buffer.concat([decipher.update(bytes.subarray(1 + IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8')
  } catch {
    return undefined
  }
}
