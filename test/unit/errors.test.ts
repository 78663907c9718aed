// The error table: every code is documented in docs/errors.md with its HTTP status and JSON-RPC code, errors keep
// their cause, and the wire form of an unknown error never carries its message.
import { readFile } from 'node:fs/promises'
import { describe, expect, it } from 'vitest'
import { toWireError } from '../../src/wire/error-replies.ts'
import { ERRORS, GatewayError, RpcError, errorMessage, gatewayError, type ErrorCode } from '../../src/errors.ts'

const ERRORS_DOC = new URL('../../docs/errors.md', import.meta.url)
const CODES = Object.keys(ERRORS) as ErrorCode[]

/** The rows of docs/errors.md's error table: `| \`GW_ERR_…\` | status | rpc | meaning |`. */
async function documentedErrors (): Promise<Map<string, { status: number, rpc: number, meaning: string }>> {
  const text = await readFile(ERRORS_DOC, 'utf8')
  const rows = new Map<string, { status: number, rpc: number, meaning: string }>()
  for (const line of text.split('\n')) {
    const match = /^\|\s*`(GW_ERR_[A-Z_]+)`\s*\|\s*(\d+)\s*\|\s*(-?\d+)\s*\|(.*)\|\s*$/.exec(line)
    if (match) rows.set(match[1]!, { status: Number(match[2]), rpc: Number(match[3]), meaning: match[4]!.trim() })
  }
  return rows
}

describe('the error table', () => {
  it('documents every code in docs/errors.md with its HTTP status and JSON-RPC code', async () => {
    const documented = await documentedErrors()
    for (const code of CODES) {
      const row = documented.get(code)
      expect(row, `${code} is missing from the error table of docs/errors.md`).toBeDefined()
      expect({ code, status: row!.status, rpc: row!.rpc }).toEqual({ code, status: ERRORS[code].status, rpc: ERRORS[code].rpc })
      expect(row!.meaning.length, `${code} needs a meaning in docs/errors.md`).toBeGreaterThan(10)
    }
  })

  it('documents no code that does not exist', async () => {
    const documented = await documentedErrors()
    expect([...documented.keys()].filter((code) => !(code in ERRORS))).toEqual([])
  })

  it('uses JSON-RPC codes in the ranges the protocol allows', () => {
    for (const code of CODES) {
      const { rpc, status } = ERRORS[code]
      expect(Number.isInteger(rpc) && rpc < 0, code).toBe(true)
      expect(status >= 200 && status < 600, code).toBe(true)
    }
  })
})

describe('GatewayError', () => {
  it('carries the code, the statuses of its table row and a filled message', () => {
    const err = new GatewayError('GW_ERR_UPSTREAM_TIMEOUT', ['search', 'tools/call', '5000ms'])
    expect(err).toBeInstanceOf(Error)
    expect(err.name).toBe('GatewayError')
    expect(err.code).toBe('GW_ERR_UPSTREAM_TIMEOUT')
    expect(err.statusCode).toBe(504)
    expect(err.rpcCode).toBe(-32001)
    expect(err.message).toBe("upstream 'search' did not answer tools/call within 5000ms")
    expect(gatewayError('GW_ERR_TOOL_NOT_FOUND', 'x__y').message).toBe("Unknown tool: 'x__y'")
  })

  it('keeps its cause', () => {
    const cause = new Error('connect ECONNREFUSED 127.0.0.1:9000')
    const err = new GatewayError('GW_ERR_UPSTREAM_UNAVAILABLE', ['search', 'connect failed'], { cause })
    expect(err.cause).toBe(cause)
    expect(new GatewayError('GW_ERR_INTERNAL', ['x'], { cause: 'a string' }).cause).toBe('a string')
    expect('cause' in new GatewayError('GW_ERR_INTERNAL', ['x'])).toBe(false)
  })

  it('builds every code without throwing, leaving no placeholder behind', () => {
    for (const code of CODES) {
      const placeholders = ERRORS[code].message.split('%s').length - 1
      const err = new GatewayError(code, Array.from({ length: placeholders }, (_, i) => `arg${i}`))
      expect(err.message, code).not.toContain('%s')
    }
  })
})

describe('toWireError', () => {
  it('sends a GatewayError with its JSON-RPC code, message and data', () => {
    const err = new GatewayError('GW_ERR_RPC_INVALID_PARAMS', ["'name' must be a non-empty string"], { data: { field: 'name' } })
    expect(toWireError(err)).toEqual({ code: -32602, message: "Invalid params: 'name' must be a non-empty string", data: { code: 'GW_ERR_RPC_INVALID_PARAMS', field: 'name' } })
    // The stable code goes out in `data` too, where clients can branch on it.
    expect(toWireError(new GatewayError('GW_ERR_SESSION_NOT_FOUND')).data).toEqual({ code: 'GW_ERR_SESSION_NOT_FOUND' })
  })

  it('passes an upstream RpcError through verbatim', () => {
    expect(toWireError(new RpcError(-32042, 'upstream says no', { retry: false }))).toEqual({ code: -32042, message: 'upstream says no', data: { retry: false } })
  })

  it('never leaks what an unknown error says', () => {
    const secret = 'password=hunter2 at /srv/secret/db.sqlite'
    const unknown: unknown[] = [
      new Error(secret),
      new TypeError(secret),
      Object.assign(new Error(secret), { code: 'ECONNREFUSED', data: secret, rpcCode: -32000 }),
      { message: secret, code: -32000 },
      secret,
      undefined,
      null,
    ]
    for (const err of unknown) {
      const wire = toWireError(err)
      expect(wire).toEqual({ code: -32603, message: 'internal gateway error: unexpected failure', data: { code: 'GW_ERR_INTERNAL' } })
      expect(JSON.stringify(wire)).not.toContain('hunter2')
    }
  })
})

describe('errorMessage', () => {
  it('reads the message of errors and stringifies anything else', () => {
    expect(errorMessage(new Error('boom'))).toBe('boom')
    expect(errorMessage('plain')).toBe('plain')
    expect(errorMessage(42)).toBe('42')
  })
})
