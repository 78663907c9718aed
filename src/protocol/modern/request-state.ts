import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import { GatewayError } from '../../errors.ts'

/**
 * The opaque `requestState` of a modern sync call waiting for input: names the held call and its
 * principal, expires, and is signed (HMAC-SHA256) so a client can neither forge nor alter it. The key
 * comes from configuration so every gateway process accepts states minted by another; without one, a
 * random per-process key is used.
 */
export class RequestStateCodec {
  readonly #key: Buffer
  readonly #ttlMs: number

  constructor (secret: string | undefined, ttlMs: number) {
    this.#key = secret === undefined || secret === '' ? randomBytes(32) : Buffer.from(secret, 'utf8')
    this.#ttlMs = ttlMs
  }

  mint (callId: string, principal: string, now = Date.now()): string {
    const payload = Buffer.from(JSON.stringify({ c: callId, p: principal, x: now + this.#ttlMs })).toString('base64url')
    return `${payload}.${this.#sign(payload)}`
  }

  /** The call id inside a state minted for `principal`; anything else is GW_ERR_REQUEST_STATE_INVALID. */
  verify (state: string, principal: string, now = Date.now()): string {
    const dot = state.indexOf('.')
    const payload = dot > 0 ? state.slice(0, dot) : ''
    const mac = Buffer.from(dot > 0 ? state.slice(dot + 1) : '', 'base64url')
    const expected = Buffer.from(this.#sign(payload), 'base64url')
    if (payload === '' || mac.length !== expected.length || !timingSafeEqual(mac, expected)) {
      throw new GatewayError('GW_ERR_REQUEST_STATE_INVALID', ['was not issued by this gateway or was altered'])
    }
    const value = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { c: string, p: string, x: number }
    if (value.p !== principal) throw new GatewayError('GW_ERR_REQUEST_STATE_INVALID', ['names no call that is waiting for you (it finished, expired or was never yours)'])
    if (value.x < now) throw new GatewayError('GW_ERR_REQUEST_STATE_INVALID', ['has expired'])
    return value.c
  }

  #sign (payload: string): string {
    return createHmac('sha256', this.#key).update(payload).digest('base64url')
  }
}
