import type { ServerResponse } from 'node:http'
import type { FastifyReply } from 'fastify'
import { GatewayError, RpcError, type WireError } from '../errors.ts'
import { noteErrorCode } from './access-notes.ts'
import type { RpcErrorResponse } from './jsonrpc.ts'

/**
 * How an error goes on the wire, written in this one place: the JSON-RPC `error` object, the JSON-RPC
 * response that carries it, and the HTTP reply (status, headers, body) of an error that ends the exchange,
 * for the MCP endpoint and for the admin API.
 */

/** The body of every admin API error: the stable code and a message that says what to fix. */
export interface AdminErrorBody {
  error: { code: string, message: string }
}

export interface HttpErrorOptions {
  /** The request the error answers; null (the default) when there is none or it could not be read. */
  id?: string | number | null
  /** The status to answer with instead of the error's own (a 2026-07-28 error ending its exchange with 400). */
  status?: number
  /** Headers of the exchange that go with the error: the session's id, `Allow`, a `WWW-Authenticate` challenge. */
  headers?: Readonly<Record<string, string>>
  /** `json-rpc` (the default) for the MCP endpoint; `admin` for the admin API's `{ error: { code, message } }`. */
  form?: 'json-rpc' | 'admin'
}

export interface HttpErrorReply {
  status: number
  headers: Record<string, string>
  body: string
}

/** What an unexpected failure becomes: its own text may name files, hosts or secrets, so none of it goes out. */
function internalError (): GatewayError {
  return new GatewayError('GW_ERR_INTERNAL', ['unexpected failure'])
}

/**
 * A gateway error's `data` as it goes out: its stable code (`GW_ERR_…`) first, then what the error carries
 * itself (an object's fields; data of another shape, which no gateway error has, is left as it is).
 */
function dataWithCode (err: GatewayError): unknown {
  const { data } = err
  if (data === undefined) return { code: err.code }
  if (typeof data !== 'object' || data === null || Array.isArray(data)) return data
  return Object.assign({ code: err.code }, data, { code: err.code })
}

/**
 * The JSON-RPC `error` object for any thrown value: a gateway error carries its code in `data.code`; an
 * upstream's error goes as it came; unknown errors never leak their internals.
 */
export function toWireError (err: unknown): WireError {
  if (err instanceof GatewayError) return { code: err.rpcCode, message: err.message, data: dataWithCode(err) }
  if (err instanceof RpcError) {
    const wire: WireError = { code: err.rpcCode, message: err.message }
    if (err.data !== undefined) wire.data = err.data
    return wire
  }
  return toWireError(internalError())
}

export function errorResponse (id: string | number | null, err: unknown): RpcErrorResponse {
  return { jsonrpc: '2.0', id, error: toWireError(err) }
}

/** The stable code an error goes out with (an unexpected one: GW_ERR_INTERNAL). */
function codeOf (err: unknown): string {
  return err instanceof GatewayError ? err.code : internalError().code
}

function adminErrorBody (err: unknown): AdminErrorBody {
  const known = err instanceof GatewayError ? err : internalError()
  return { error: { code: known.code, message: known.message } }
}

/**
 * The HTTP reply of an error that ends the exchange: the error's status (500 for an unexpected one), a JSON
 * body, and `Retry-After` when the error knows when to try again.
 */
export function httpErrorReply (err: unknown, options: HttpErrorOptions = {}): HttpErrorReply {
  const body = JSON.stringify(options.form === 'admin' ? adminErrorBody(err) : errorResponse(options.id ?? null, err))
  const known = err instanceof GatewayError ? err : undefined
  const headers: Record<string, string> = {
    ...options.headers,
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(body)),
  }
  if (known?.retryAfter !== undefined) headers['retry-after'] = String(known.retryAfter)
  return { status: options.status ?? known?.statusCode ?? internalError().statusCode, headers, body }
}

/** Ends a raw response with the error (the MCP endpoint writes its responses itself once a request is read). */
export function writeHttpError (res: ServerResponse, err: unknown, options?: HttpErrorOptions): void {
  const { status, headers, body } = httpErrorReply(err, options)
  noteErrorCode(res, codeOf(err))
  res.writeHead(status, headers).end(body)
}

/** Answers a Fastify reply with the error (hooks and routes that have not taken over the raw response); return the reply. */
export function sendHttpError (reply: FastifyReply, err: unknown, options?: HttpErrorOptions): FastifyReply {
  const { status, headers, body } = httpErrorReply(err, options)
  noteErrorCode(reply.raw, codeOf(err))
  return reply.code(status).headers(headers).send(body)
}
