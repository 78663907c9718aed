import type { JSONRPCMessage } from '@modelcontextprotocol/client'
import { GatewayError } from '../errors.ts'
import type { Logger } from '../observability/logger.ts'
import type { RequestId } from '../wire/jsonrpc.ts'
import type { CallRegistry } from './call-attribution.ts'

/**
 * What a task's answer may hold beyond its outcome: the JSON-RPC envelope (`jsonrpc`, `id`) around the
 * result, which tasks.maxResultBytes does not count.
 */
const ENVELOPE_BYTES = 1024

/** How large an upstream's answers may be, for one upstream session's transport. */
export interface ResponseLimits {
  /** The upstream's maxResponseBytes: any one message it sends. */
  maxResponseBytes: number
  /** A tighter limit for the answer to request `id` (a task's call: tasks.maxResultBytes), if any. */
  resultLimitOf?: ((id: RequestId) => number | undefined) | undefined
  /** An answer passed its limit and was not read (for the log). */
  onTooLarge?: ((tooLarge: ResponseTooLarge, id: RequestId | undefined) => void) | undefined
}

/** The limits of one upstream session's answers: the upstream's, and its task calls' (`calls`); an answer given up is logged. */
export function sessionLimits (maxResponseBytes: number, calls: CallRegistry, log: Logger, session: string): ResponseLimits {
  return {
    maxResponseBytes,
    resultLimitOf: (id) => calls.resultLimitOf(id),
    onTooLarge: (tooLarge, id) => {
      const limit = tooLarge.maxResultBytes === undefined ? 'maxResponseBytes' : 'tasks.maxResultBytes'
      log.warn({ session, requestId: id, limitBytes: tooLarge.bytes, seenBytes: tooLarge.seen }, `upstream answer over ${limit}: not read to its end; its request fails`)
    },
  }
}

/** The limit one answer is held to. */
export interface ResponseLimit {
  bytes: number
  /** The error of an answer over it, `seen` bytes read when it was given up. */
  exceeded (seen: number): ResponseTooLarge
}

/**
 * An answer that was given up once it passed its limit, before it was read to its end. It carries no upstream
 * name or request: `mapUpstreamError` makes it the gateway's error, which names them.
 */
export class ResponseTooLarge extends Error {
  /** `task`: held to tasks.maxResultBytes (`maxResultBytes`); else to the upstream's maxResponseBytes (`bytes`). */
  constructor (readonly bytes: number, readonly seen: number, readonly maxResultBytes: number | undefined) {
    super(`the answer passed ${maxResultBytes === undefined ? `maxResponseBytes (${bytes} bytes)` : `tasks.maxResultBytes (${maxResultBytes} bytes)`} and was not read to its end`)
    this.name = 'ResponseTooLarge'
  }

  /** The error the client sees. */
  toGatewayError (upstream: string, what: string): GatewayError {
    if (this.maxResultBytes !== undefined) return new GatewayError('GW_ERR_TASK_RESULT_TOO_LARGE', [`more than ${this.bytes}`, this.maxResultBytes], { cause: this })
    return new GatewayError('GW_ERR_UPSTREAM_RESPONSE_TOO_LARGE', [upstream, what, this.bytes], { cause: this })
  }
}

/** The limit of the answer to request `id` (undefined: a message that is no request's answer, such as one of the standalone stream). */
export function limitFor (limits: ResponseLimits, id: RequestId | undefined): ResponseLimit {
  const result = id === undefined ? undefined : limits.resultLimitOf?.(id)
  if (result !== undefined && result + ENVELOPE_BYTES < limits.maxResponseBytes) {
    const bytes = result + ENVELOPE_BYTES
    return { bytes, exceeded: (seen) => new ResponseTooLarge(bytes, seen, result) }
  }
  const bytes = limits.maxResponseBytes
  return { bytes, exceeded: (seen) => new ResponseTooLarge(bytes, seen, undefined) }
}

/**
 * The JSON-RPC error response that fails request `id` in the SDK client in place of an answer that was given
 * up. It is handed to the SDK in this process only, never sent: its `data` is the error itself, which
 * `mapUpstreamError` finds again (nothing an upstream writes can be such an object).
 */
export function tooLargeResponse (id: RequestId, tooLarge: ResponseTooLarge): JSONRPCMessage {
  return { jsonrpc: '2.0', id, error: { code: -32603, message: tooLarge.message, data: tooLarge } } as unknown as JSONRPCMessage
}

/** The ResponseTooLarge an upstream request failed with: thrown by a transport, or carried by a `tooLargeResponse`. */
export function responseTooLarge (err: unknown): ResponseTooLarge | undefined {
  if (err instanceof ResponseTooLarge) return err
  const data = (err as { data?: unknown } | null | undefined)?.data
  return data instanceof ResponseTooLarge ? data : undefined
}
