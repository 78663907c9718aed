/**
 * The Mcp-Name routing header of 2026-07-28 requests: which body field it mirrors per method, and how a
 * value that is not plain visible ASCII travels (base64 between `=?base64?` and `?=`).
 */
export const MCP_NAME_SOURCE: Readonly<Record<string, string>> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId',
}

const PREFIX = '=?base64?'
const SUFFIX = '?='
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/

export function encodeHeaderValue (value: string): string {
  const plain = value !== '' && value === value.trim() && /^[\x20-\x7e]*$/.test(value) && !(value.startsWith(PREFIX) && value.endsWith(SUFFIX))
  return plain ? value : `${PREFIX}${Buffer.from(value, 'utf8').toString('base64')}${SUFFIX}`
}

/** The value a header carries; undefined when it claims base64 but is not valid base64. */
export function decodeHeaderValue (value: string): string | undefined {
  const trimmed = value.trim()
  if (!trimmed.startsWith(PREFIX) || !trimmed.endsWith(SUFFIX) || trimmed.length < PREFIX.length + SUFFIX.length) return trimmed
  const encoded = trimmed.slice(PREFIX.length, -SUFFIX.length)
  if (encoded.length % 4 !== 0 || !BASE64.test(encoded)) return undefined
  return Buffer.from(encoded, 'base64').toString('utf8')
}
