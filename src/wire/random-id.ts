import { randomFillSync } from 'node:crypto'

/** Random bytes are drawn from the system's CSPRNG this many at a time (as `crypto.randomUUID` does). */
const POOL_BYTES = 4096

const pool = Buffer.allocUnsafe(POOL_BYTES)
let offset = POOL_BYTES

/**
 * `bytes` random bytes from the system's CSPRNG, as base64url: the unguessable ids of tasks, input requests
 * and held calls. A call to `randomBytes` per id costs a trip into the crypto library each time (a share of
 * every task creation that a profile shows); the bytes come from a pool refilled 4 KiB at a time instead,
 * and each byte is handed out once.
 */
export function randomId (bytes = 16): string {
  if (bytes > POOL_BYTES) throw new RangeError(`randomId: at most ${POOL_BYTES} bytes`)
  if (offset + bytes > POOL_BYTES) {
    randomFillSync(pool)
    offset = 0
  }
  const id = pool.toString('base64url', offset, offset + bytes)
  offset += bytes
  return id
}
