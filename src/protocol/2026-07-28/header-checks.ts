import type { IncomingHttpHeaders } from 'node:http'
import { GatewayError } from '../../errors.ts'
import type { JsonObject, RpcRequest } from '../../wire/jsonrpc.ts'
import { decodeHeaderValue, MCP_NAME_SOURCE } from '../../wire/mcp-name.ts'

function header (headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name]
  return Array.isArray(value) ? value[0] : value
}

function mismatch (headerName: string, value: string | undefined, body: string): GatewayError {
  const description = value === undefined
    ? `the body carries ${body} but the required ${headerName} header is absent`
    : `${headerName} is '${value}' but the body carries ${body}`
  return new GatewayError('GW_ERR_HEADER_MISMATCH', [description], { data: { mismatch: { header: value ?? '(missing)', body } } })
}

/**
 * The routing headers of a modern request (MCP-Protocol-Version is checked with the envelope) must agree
 * with its body (HTTP 400, -32020 otherwise), so an intermediary that routes by header can never be told
 * something different from what is executed.
 */
/** The body values a tool's input schema mirrors in `Mcp-Param-<Name>` headers (SEP-2243). */
function checkParamHeaders (headers: IncomingHttpHeaders, request: RpcRequest, inputSchema: JsonObject | undefined): void {
  const properties = inputSchema?.properties
  if (properties === null || typeof properties !== 'object') return
  const args = (request.params?.arguments ?? {}) as JsonObject
  for (const [property, schema] of Object.entries(properties as JsonObject)) {
    const name = (schema as JsonObject | null)?.['x-mcp-header']
    if (typeof name !== 'string') continue
    const headerName = `Mcp-Param-${name}`
    const value = header(headers, headerName.toLowerCase())
    const body = args[property]
    if (body === undefined || body === null) {
      if (value !== undefined) throw mismatch(headerName, value, `no value for arguments.${property}`)
      continue
    }
    if (typeof body === 'object') continue
    const expected = String(body)
    if (value === undefined || decodeHeaderValue(value) !== expected) throw mismatch(headerName, value, `arguments.${property}=${JSON.stringify(body)}`)
  }
}

/** The input schema of a tool, to check its parameter headers; undefined for tools the gateway does not know. */
export type ToolSchemaLookup = (name: string) => JsonObject | undefined

export function checkHeaders (headers: IncomingHttpHeaders, request: RpcRequest, toolSchema: ToolSchemaLookup): void {
  const method = header(headers, 'mcp-method')
  if (method !== request.method) throw mismatch('Mcp-Method', method, `method ${request.method}`)
  const field = MCP_NAME_SOURCE[request.method]
  if (field === undefined) return
  const expected = request.params?.[field]
  if (typeof expected !== 'string') return
  const name = header(headers, 'mcp-name')
  if (name === undefined || decodeHeaderValue(name) !== expected) throw mismatch('Mcp-Name', name, `params.${field}=${JSON.stringify(expected)}`)
  if (request.method === 'tools/call') checkParamHeaders(headers, request, toolSchema(expected))
}
