import { randomUUID } from 'node:crypto'
import type { PeerRequests } from '../../cluster/peer-requests.ts'
import { GatewayError, RpcError } from '../../errors.ts'
import { classifyMessage, type JsonObject, type RpcMessage, type RpcResponse } from '../../wire/jsonrpc.ts'

interface Pending {
  sessionId: string
  resolve (result: JsonObject): void
  reject (err: unknown): void
}

const ID_PREFIX = 'gw-'
/** The peer-request kind that carries a client's answer to the process that relayed the request. */
const ANSWER = 'legacy/relayed-answer'

/** The part of a relayed request's id after the process: a random UUID, as `send` makes it. */
const SEQUENCE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
/** A gateway process id (base64url), as it appears encoded in the id. */
const PROCESS_ID = /^[A-Za-z0-9_-]+$/

/**
 * The `params` member of a relayed request: none when the upstream's were empty. The gateway reads a request
 * without params as `{}`; the client gets it without, as servers send roots/list.
 */
function relayedParams (params: JsonObject): { params?: JsonObject } {
  return Object.keys(params).length === 0 ? {} : { params }
}

/**
 * The gateway process named in a relayed request's id (`gw-<base64url process id>.<uuid>`); undefined
 * when the id is not one the gateway could have made (it then names no process, and nothing waits for it).
 */
function ownerOf (id: unknown): string | undefined {
  if (typeof id !== 'string' || !id.startsWith(ID_PREFIX)) return undefined
  const dot = id.indexOf('.')
  if (dot <= ID_PREFIX.length || !SEQUENCE.test(id.slice(dot + 1))) return undefined
  const encoded = id.slice(ID_PREFIX.length, dot)
  const owner = Buffer.from(encoded, 'base64url').toString('utf8')
  // Decoding is lenient: only an encoding that gives back exactly what was sent names a process.
  return PROCESS_ID.test(owner) && Buffer.from(owner).toString('base64url') === encoded ? owner : undefined
}

/**
 * Server→client requests relayed live to a legacy client (elicitation, sampling, roots during a
 * call). Each gets a gateway-owned id that names the process relaying it; the client's answer arrives
 * as a POSTed JSON-RPC response, on any process, and is matched by id and session where the request
 * waits: an answer from another session never resolves a request.
 */
export class ClientRequestBroker {
  readonly #pending = new Map<string, Pending>()
  readonly #peers: PeerRequests | undefined
  readonly #idPrefix: string

  /** Without `peers`, answers are only matched in this process (one gateway process). */
  constructor (peers?: PeerRequests) {
    this.#peers = peers
    this.#idPrefix = peers ? `${ID_PREFIX}${Buffer.from(peers.processId).toString('base64url')}.` : ID_PREFIX
    peers?.handle(ANSWER, async (payload) => {
      const inbound = classifyMessage(payload.response)
      const accepted = typeof payload.sessionId === 'string' && inbound.kind === 'response' && this.#acceptLocal(payload.sessionId, inbound.message)
      return { accepted }
    })
  }

  send (
    sessionId: string,
    emit: (message: RpcMessage) => void,
    method: string,
    params: JsonObject,
    signal: AbortSignal,
  ): Promise<JsonObject> {
    if (signal.aborted) return Promise.reject(signal.reason)
    const id = `${this.#idPrefix}${randomUUID()}`
    return new Promise<JsonObject>((resolve, reject) => {
      const onAbort = (): void => {
        if (!this.#pending.delete(id)) return
        emit({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'the upstream request was cancelled' } })
        reject(signal.reason)
      }
      signal.addEventListener('abort', onAbort, { once: true })
      this.#pending.set(id, {
        sessionId,
        resolve: (result) => { signal.removeEventListener('abort', onAbort); resolve(result) },
        reject: (err) => { signal.removeEventListener('abort', onAbort); reject(err) },
      })
      emit({ jsonrpc: '2.0', id, method, ...relayedParams(params) })
    })
  }

  /**
   * Routes a client's response to the request it answers, in this process or in the one its id names;
   * false when no request of this session with that id waits anywhere (an id the gateway could not have
   * made is never sent on). Throws GW_ERR_PEER_LOST when the process that relayed the request is gone
   * (its call went with it).
   */
  async accept (sessionId: string, response: RpcResponse, signal: AbortSignal): Promise<boolean> {
    if (this.#acceptLocal(sessionId, response)) return true
    const owner = ownerOf(response.id)
    if (!this.#peers || owner === undefined || owner === this.#peers.processId) return false
    try {
      const reply = await this.#peers.request(owner, ANSWER, { sessionId, response: response as unknown as JsonObject }, signal)
      return reply.accepted === true
    } catch (err) {
      if (err instanceof GatewayError && err.code === 'GW_ERR_PEER_LOST') throw new GatewayError('GW_ERR_PEER_LOST', ['tools/call'], { cause: err })
      throw err
    }
  }

  #acceptLocal (sessionId: string, response: RpcResponse): boolean {
    const key = String(response.id)
    const pending = this.#pending.get(key)
    if (!pending || pending.sessionId !== sessionId) return false
    this.#pending.delete(key)
    if ('error' in response) pending.reject(new RpcError(response.error.code, response.error.message, response.error.data))
    else pending.resolve(response.result)
    return true
  }

  get size (): number {
    return this.#pending.size
  }
}
