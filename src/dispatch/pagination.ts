import { GatewayError } from '../errors.ts'
import type { JsonObject } from '../wire/jsonrpc.ts'
import { optionalString } from '../wire/params.ts'

/** Cuts a list into pages with opaque cursors; a cursor that does not decode is -32602. */
export function paginate (items: readonly JsonObject[], params: JsonObject, pageSize: number): { page: JsonObject[], nextCursor?: string } {
  const cursor = optionalString(params, 'cursor')
  let offset = 0
  if (cursor !== undefined) {
    const decoded = Number(Buffer.from(cursor, 'base64url').toString('utf8').replace(/^o:/, ''))
    if (!cursor.length || !Buffer.from(cursor, 'base64url').toString('utf8').startsWith('o:') || !Number.isInteger(decoded) || decoded < 0) {
      throw new GatewayError('GW_ERR_RPC_INVALID_PARAMS', ['\'cursor\' is not a cursor this gateway issued; start again without a cursor'])
    }
    offset = decoded
  }
  const page = items.slice(offset, offset + pageSize)
  const next = offset + pageSize
  return next < items.length ? { page, nextCursor: Buffer.from(`o:${next}`).toString('base64url') } : { page }
}
