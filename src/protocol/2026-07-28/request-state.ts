import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import { GatewayError } from '../../errors.ts'

/** A held call and the gateway process holding it (calls are held in that process's memory). */
export interface HeldCallRef {
  callId: string
  /** The process id of the gateway process holding the call. */
  owner: string
}

interface StatePayload {
  c: string
  o: string
  p: string
  x: number
}

function isPayload (value: unknown): value is StatePayload {
  const v = value as Partial<StatePayload> | null
  return typeof v === 'object' && v !== null && typeof v.c === 'string' && typeof v.o === 'string' && typeof v.p === 'string' && typeof v.x === 'number'
}

function invalid (why: string): GatewayError {
  return new GatewayError('GW_ERR_REQUEST_STATE_INVALID', [why])
}

/**
 * The opaque `requestState` of a modern sync call waiting for input: names the held call, the gateway
 * process holding it and its principal, expires, and is signed (HMAC-SHA256) so a client can neither
 * forge nor alter it (nor send a retry to a process of its choosing). The key comes from configuration
 * so every gateway process accepts states minted by another; without one, a random per-process key is used.
 */
export class RequestStateCodec {
  readonly #key: Buffer
  readonly #ttlMs: number

  constructor (secret: string | undefined, ttlMs: number) {
    this.#key = secret === undefined || secret === '' ? randomBytes(32) : Buffer.from(secret, 'utf8')
    this.#ttlMs = ttlMs
  }

  mint (call: HeldCallRef, principal: string, now = Date.now()): string {
    const value: StatePayload = { c: call.callId, o: call.owner, p: principal, x: now + this.#ttlMs }
    const payload = Buffer.from(JSON.stringify(value)).toString('base64url')
    return `${payload}.${this.#sign(payload)}`
  }

  /** The call inside a state minted for `principal`; anything else is GW_ERR_REQUEST_STATE_INVALID. */
  verify (state: string, principal: string, now = Date.now()): HeldCallRef {
    const dot = state.indexOf('.')
    const payload = dot > 0 ? state.slice(0, dot) : ''
    const mac = Buffer.from(dot > 0 ? state.slice(dot + 1) : '', 'base64url')
    const expected = Buffer.from(this.#sign(payload), 'base64url')
    if (payload === '' || mac.length !== expected.length || !timingSafeEqual(mac, expected)) throw invalid('was not issued by this gateway or was altered')
    let value: unknown
    try {
      value = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'))
    } catch {
      // Not JSON: refused just below, as a payload of another format.
    }
    // Signed by this gateway but not in this version's format (minted before an upgrade).
    if (!isPayload(value)) throw invalid('was issued by another version of this gateway')
    if (value.p !== principal) throw invalid('names no call that is waiting for you (it finished, expired or was never yours)')
    if (value.x < now) throw invalid('has expired')
    return { callId: value.c, owner: value.o }
  }

  #sign (payload: string): string {
    return createHmac('sha256', this.#key).update(payload).digest('base64url')
  }
}
