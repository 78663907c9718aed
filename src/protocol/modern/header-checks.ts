import type { IncomingHttpHeaders } from 'node:http'
import { GatewayError } from '../../errors.ts'
import type { RpcRequest } from '../jsonrpc.ts'

/** The body field each routed method mirrors in the Mcp-Name header. */
const NAME_SOURCE: Readonly<Record<string, string>> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId',
}

function header (headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name]
  return Array.isArray(value) ? value[0] : value
}

/** Mcp-Name values that are not plain visible ASCII travel base64-encoded between sentinels. */
function decodeName (value: string): string {
  const match = /^=\?base64\?(.*)\?=$/.exec(value)
  return match ? Buffer.from(match[1]!, 'base64').toString('utf8') : value
}

function mismatch (headerName: string, value: string | undefined, body: string): GatewayError {
  const description = value === undefined
    ? `the body carries ${body} but the required ${headerName} header is absent`
    : `${headerName} is '${value}' but the body carries ${body}`
  return new GatewayError('GW_ERR_HEADER_MISMATCH', [description], { data: { mismatch: { header: value ?? '(missing)', body } } })
}

/**
 * The routing headers of a modern request (MCP-Protocol-Version is checked with the envelope) must agree with its body (HTTP 400, -32020 otherwise), so an
 * intermediary that routes by header can never be told something different from what is executed.
 */
export function checkHeaders (headers: IncomingHttpHeaders, request: RpcRequest): void {
  const method = header(headers, 'mcp-method')
  if (method !== request.method) throw mismatch('Mcp-Method', method, `method ${request.method}`)
  const field = NAME_SOURCE[request.method]
  if (field === undefined) return
  const expected = request.params?.[field]
  if (typeof expected !== 'string') return
  const name = header(headers, 'mcp-name')
  if (name === undefined || decodeName(name) !== expected) throw mismatch('Mcp-Name', name, `params.${field}=${JSON.stringify(expected)}`)
}
