import type { PeerRequests } from '../../cluster/peer-requests.ts'
import { errorMessage, GatewayError } from '../../errors.ts'
import type { Logger } from '../../observability/logger.ts'
import { isObject, type JsonObject } from '../../wire/jsonrpc.ts'
import type { RequestStateCodec } from './request-state.ts'

/** A client's retry of a held call, as the process holding the call serves it. */
export interface HeldRetry {
  callId: string
  principal: string
  inputResponses: JsonObject
}

/** Resumes a call this process holds with a retry's answers and renders what the client gets next. */
export type ResumeHeld = (retry: HeldRetry, signal: AbortSignal) => Promise<JsonObject>

/** Serves a retry wherever its call is held; the requestState is verified first. */
export type RouteRetry = (requestState: string, principal: string, inputResponses: JsonObject, signal: AbortSignal) => Promise<JsonObject>

export interface RetryRouterDeps {
  /** This gateway process. */
  processId: string
  states: RequestStateCodec
  peers: PeerRequests
  log: Logger
}

function retryOf (payload: JsonObject): HeldRetry {
  const { callId, principal, inputResponses } = payload
  if (typeof callId !== 'string' || typeof principal !== 'string' || !isObject(inputResponses)) {
    throw new GatewayError('GW_ERR_INTERNAL', ['a malformed retry from another gateway process'])
  }
  return { callId, principal, inputResponses }
}

/**
 * Routes the MRTR retries of 2026-07-28 synchronous calls to the gateway process holding the call. A call
 * waiting for input is held in the memory of the process that started it, and its requestState (signed)
 * names that process. A retry that lands there resumes the call directly; a retry that lands on another
 * process is sent to the owner over the peer-request channel, the owner serves it exactly as if it had
 * received it, and the result or error comes back unchanged. The forwarding process stops waiting when
 * its client goes away (the owner is told, and stops waiting too) or when the owner's lease lapses
 * (GW_ERR_PEER_LOST).
 */
export class RetryRouter {
  readonly #deps: RetryRouterDeps

  constructor (deps: RetryRouterDeps) {
    this.#deps = deps
  }

  /** The requestState of a call this process holds, for `principal`'s retry. */
  mint (callId: string, principal: string): string {
    return this.#deps.states.mint({ callId, owner: this.#deps.processId }, principal)
  }

  /**
   * Registers how this process resumes the held calls of `method` (for retries any process receives) and
   * returns the function that serves a retry of that method. `method` also names what was lost in a
   * GW_ERR_PEER_LOST message ("the gateway process holding this tools/call is gone").
   */
  route (method: 'tools/call' | 'prompts/get', resume: ResumeHeld): RouteRetry {
    const { processId, states, peers } = this.#deps
    peers.handle(method, async (payload, signal) => await this.#serve(method, payload, signal, resume))
    return async (requestState, principal, inputResponses, signal) => {
      const { callId, owner } = states.verify(requestState, principal)
      const retry: HeldRetry = { callId, principal, inputResponses }
      if (owner === processId) return await resume(retry, signal)
      return await peers.request(owner, method, { ...retry }, signal)
    }
  }

  /** Serves a retry another process received; its outcome, result or error, goes back there. */
  async #serve (method: string, payload: JsonObject, signal: AbortSignal, resume: ResumeHeld): Promise<JsonObject> {
    const { log } = this.#deps
    const retry = retryOf(payload)
    log.debug({ method, callId: retry.callId }, 'resuming a held call for a retry another gateway process received')
    try {
      return await resume(retry, signal)
    } catch (err) {
      // The forwarding process's client went away (or this process is stopping): the call stays held.
      if (signal.aborted) log.debug({ method, reason: errorMessage(signal.reason) }, 'stopped serving a forwarded retry')
      throw err
    }
  }
}
