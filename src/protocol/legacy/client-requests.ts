import { randomUUID } from 'node:crypto'
import { RpcError } from '../../errors.ts'
import type { JsonObject, RpcMessage, RpcResponse } from '../jsonrpc.ts'

interface Pending {
  sessionId: string
  resolve (result: JsonObject): void
  reject (err: unknown): void
}

/**
 * Server→client requests relayed live to a legacy client (elicitation, sampling, roots during a
 * call). Each gets a gateway-owned id; the client's answer arrives as a POSTed JSON-RPC response and
 * is matched by id and session: an answer from another session never resolves a request.
 */
export class ClientRequestBroker {
  readonly #pending = new Map<string, Pending>()

  send (sessionId: string, emit: (message: RpcMessage) => void, method: string, params: JsonObject, signal: AbortSignal): Promise<JsonObject> {
    if (signal.aborted) return Promise.reject(signal.reason)
    const id = `gw-${randomUUID()}`
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
      emit({ jsonrpc: '2.0', id, method, params })
    })
  }

  /** Routes a client's response; false when no request of this session has that id. */
  accept (sessionId: string, response: RpcResponse): boolean {
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
