// upstreams[].credentials, kind per-principal: each principal reaches an upstream behind API keys with its own key,
// read from a file or the environment, on every request of its own upstream session; a principal without one does
// not see the upstream and is refused by name; a reload that rotates a key is used by the next call; the keys
// never reach the log or the admin API.
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { parseConfig } from '../../src/config/load.ts'
import { textOf } from '../helpers/clients.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { RawSession } from '../helpers/raw-session.ts'
import { startApiKeyUpstream, type ApiKeyUpstream } from '../fixtures/api-key-upstream.ts'

type Json = Record<string, unknown>

const TOKENS = { alice: 'alice-token-0123456789', bob: 'bob-token-0123456789', carol: 'carol-token-0123456789' }
const ADMIN_TOKEN = 'admin-token-0123456789'
const KEYS = { gateway: 'gw-key-3f9a1c', alice: 'alice-key-7d21e0', aliceRotated: 'alice-key-rotated-55b0c4', bob: 'bob-key-c08e6b' }
const BOB_VARIABLE = 'CRM_KEY_BOB_FOR_TEST'

const bearer = (who: keyof typeof TOKENS): Record<string, string> => ({ authorization: `Bearer ${TOKENS[who]}` })

describe('per-principal upstream credentials', () => {
  let dir: string
  let keyFile: string
  let crm: ApiKeyUpstream
  let gw: RunningGateway
  let raw: Json

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gw-credentials-'))
    keyFile = join(dir, 'crm-keys.yaml')
    await writeFile(keyFile, `alice: ${KEYS.alice}\n`)
    await chmod(keyFile, 0o600)
    crm = await startApiKeyUpstream('x-api-key', 'Key', [KEYS.gateway, KEYS.alice, KEYS.aliceRotated, KEYS.bob])
    process.env[BOB_VARIABLE] = KEYS.bob
    const token = (principal: keyof typeof TOKENS): Json => ({ principal, sha256: sha256Hex(TOKENS[principal]), scopes: [] })
    raw = {
      auth: { tokens: [token('alice'), token('bob'), token('carol')] },
      admin: { port: 0, tokenSha256: sha256Hex(ADMIN_TOKEN) },
      upstreams: [{
        name: 'crm',
        transport: 'streamable-http',
        url: crm.url,
        // The gateway's own session (health, the lists callers start from) is let in with a key of its own.
        headers: { 'X-Api-Key': `Key ${KEYS.gateway}` },
        credentials: { kind: 'per-principal', header: 'x-api-key', scheme: 'Key', file: keyFile, env: { bob: BOB_VARIABLE } },
      }],
    }
    gw = await startGateway(raw, { [BOB_VARIABLE]: KEYS.bob })
  })

  afterAll(async () => {
    await gw?.close()
    await crm?.close()
    delete process.env[BOB_VARIABLE]
    await rm(dir, { recursive: true, force: true })
  })

  const whoami = async (client: ModernRaw): Promise<string> => textOf(await client.result('tools/call', { name: 'crm__whoami', arguments: {} }))

  it('sends each principal\'s own key with each of its calls, on every request of its session', async () => {
    const alice = new ModernRaw(gw.url, {}, bearer('alice'))
    const bob = new ModernRaw(gw.url, {}, bearer('bob'))
    const before = crm.calls.length
    expect(await whoami(alice)).toBe(KEYS.alice)
    expect(await whoami(bob)).toBe(KEYS.bob)
    expect(await whoami(alice)).toBe(KEYS.alice)
    expect(await whoami(bob)).toBe(KEYS.bob)
    expect(crm.calls.slice(before)).toEqual([KEYS.alice, KEYS.bob, KEYS.alice, KEYS.bob])
    // A 2025-era session of alice's: its handshake, lists and calls all carry alice's key.
    const session = await RawSession.open(gw.url, {}, bearer('alice'))
    const from = crm.requests.length
    expect(textOf((await session.request('tools/call', { name: 'crm__whoami', arguments: {} })).result as Json)).toBe(KEYS.alice)
    await session.close()
    expect(crm.requests.slice(from).every((r) => r.admitted)).toBe(true)
    expect(crm.requests.every((r) => r.admitted)).toBe(true)
  })

  it('hides the upstream from a principal without a key, and refuses its calls naming the upstream', async () => {
    const carol = new ModernRaw(gw.url, {}, bearer('carol'))
    const alice = new ModernRaw(gw.url, {}, bearer('alice'))
    const names = (result: Json): string[] => (result.tools as Json[]).map((tool) => String(tool.name))
    expect(names(await alice.result('tools/list'))).toContain('crm__whoami')
    expect(names(await carol.result('tools/list'))).not.toContain('crm__whoami')
    const calls = crm.calls.length
    const reply = await carol.request('tools/call', { name: 'crm__whoami', arguments: {} })
    const error = reply.body.error as Json
    expect(error.code).toBe(-32068)
    expect(error.message).toMatch(/upstream 'crm' has no credential for this principal/)
    expect((error.data as Json).code).toBe('GW_ERR_UPSTREAM_NO_CREDENTIAL')
    // A 2025-era session of carol's is refused the same way.
    const session = await RawSession.open(gw.url, {}, bearer('carol'))
    const legacy = await session.request('tools/call', { name: 'crm__whoami', arguments: {} })
    expect(((legacy.error as Json).data as Json).code).toBe('GW_ERR_UPSTREAM_NO_CREDENTIAL')
    await session.close()
    expect(crm.calls.length).toBe(calls)
    expect(crm.requests.some((r) => r.key === undefined)).toBe(false)
  })

  it('uses a key rotated in the key file from the next call after a reload', async () => {
    const alice = new ModernRaw(gw.url, {}, bearer('alice'))
    expect(await whoami(alice)).toBe(KEYS.alice)
    await writeFile(keyFile, `alice: ${KEYS.aliceRotated}\n`)
    // The old key stops working upstream: only the rotated one may be sent from now on.
    crm.accepted.delete(KEYS.alice)
    await gw.gateway.reload(parseConfig({ ...raw, store: { kind: 'memory' }, server: { port: 0 } }, { [BOB_VARIABLE]: KEYS.bob }))
    expect(await whoami(alice)).toBe(KEYS.aliceRotated)
  })

  it('keeps every key out of the log and the admin API', async () => {
    const admin = gw.gateway.admin!
    const answers: string[] = []
    for (const url of ['/admin/upstreams', '/admin/tasks']) {
      const res = await admin.inject({ method: 'GET', url, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
      answers.push(res.body)
    }
    expect(answers[0]).toContain('crm')
    const seen = `${JSON.stringify(gw.logs())}\n${answers.join('\n')}`
    for (const key of Object.values(KEYS)) expect(seen).not.toContain(key)
  })
})
