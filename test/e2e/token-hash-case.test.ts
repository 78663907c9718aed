// A token's SHA-256 may be written in either case (sha256sum prints lower case, other tools upper case): the
// hash in the file is what the docs tell operators to paste, so an upper-case one must let the token in, for
// clients (auth.tokens[].sha256) and for the operator (admin.tokenSha256) alike.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { postRpc } from '../helpers/inject.ts'

const TOKEN = 'client-token-for-an-upper-case-hash'
const ADMIN_TOKEN = 'admin-token-for-an-upper-case-hash'
const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'case', version: '1' } } }

describe('token hashes written in upper case', () => {
  let gw: RunningGateway

  beforeAll(async () => {
    gw = await startGateway({
      upstreams: [demoStdio()],
      auth: { tokens: [{ principal: 'alice', sha256: sha256Hex(TOKEN).toUpperCase() }] },
      admin: { port: 0, tokenSha256: sha256Hex(ADMIN_TOKEN).toUpperCase() },
    }, {}, { listen: false })
  })

  afterAll(async () => {
    await gw?.close()
  })

  it('authenticate the client token they were made from, and no other', async () => {
    expect((await postRpc(gw.app, initialize, { authorization: `Bearer ${TOKEN}` })).status).toBe(200)
    expect((await postRpc(gw.app, initialize, { authorization: `Bearer ${TOKEN}x` })).status).toBe(401)
  })

  it('authenticate the admin token they were made from', async () => {
    const admin = gw.gateway.admin!
    expect((await admin.inject({ method: 'GET', url: '/admin/upstreams', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).statusCode).toBe(200)
    expect((await admin.inject({ method: 'GET', url: '/admin/upstreams', headers: { authorization: `Bearer ${TOKEN}` } })).statusCode).toBe(401)
  })
})
