import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Agent, fetch as undiciFetch } from 'undici'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { parseConfig } from '../../src/config/load.ts'
import { buildGateway } from '../../src/gateway.ts'
import { textOf } from '../helpers/clients.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'

/** A self-signed certificate for localhost and 127.0.0.1, made with the openssl CLI into `dir`. */
function makeCertificate (dir: string, name: string): { cert: string, key: string } {
  const cert = join(dir, `${name}.crt`)
  const key = join(dir, `${name}.key`)
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
    '-keyout', key, '-out', cert, '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
  ], { stdio: 'ignore' })
  return { cert, key }
}

/** A root CA, an intermediate CA it signs, and a localhost certificate the intermediate signs, in `dir`. */
function makeChain (dir: string): { root: string, intermediate: string, cert: string, key: string } {
  const file = (name: string): string => join(dir, `chain-${name}`)
  const openssl = (...args: string[]): void => { execFileSync('openssl', args, { stdio: 'ignore' }) }
  const newKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
  writeFileSync(file('ca.ext'), 'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n')
  writeFileSync(file('leaf.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n')
  openssl('req', '-x509', ...newKey, '-days', '1', '-keyout', file('root.key'), '-out', file('root.crt'), '-subj', '/CN=test root',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign')
  openssl('req', '-new', ...newKey, '-keyout', file('int.key'), '-out', file('int.csr'), '-subj', '/CN=test intermediate')
  openssl('x509', '-req', '-in', file('int.csr'), '-CA', file('root.crt'), '-CAkey', file('root.key'), '-CAcreateserial', '-days', '1', '-out', file('int.crt'), '-extfile', file('ca.ext'))
  openssl('req', '-new', ...newKey, '-keyout', file('leaf.key'), '-out', file('leaf.csr'), '-subj', '/CN=localhost')
  openssl('x509', '-req', '-in', file('leaf.csr'), '-CA', file('int.crt'), '-CAkey', file('int.key'), '-CAcreateserial', '-days', '1', '-out', file('leaf.crt'), '-extfile', file('leaf.ext'))
  return { root: file('root.crt'), intermediate: file('int.crt'), cert: file('leaf.crt'), key: file('leaf.key') }
}

const dir = mkdtempSync(join(tmpdir(), 'gateway-tls-'))
const server = makeCertificate(dir, 'server')
const other = makeCertificate(dir, 'other')
const chain = makeChain(dir)

afterAll(() => {
  rmSync(dir, { recursive: true, force: true })
})

/** The gateway serves HTTPS from `server.tls`; a real SDK client trusting the certificate works through it. */
describe('TLS on the listener (server.tls)', () => {
  let gw: RunningGateway
  let agent: Agent

  beforeAll(async () => {
    gw = await startGateway({ upstreams: [demoStdio()], server: { tls: server } })
    agent = new Agent({ connect: { ca: readFileSync(server.cert) } })
  })

  afterAll(async () => {
    await agent?.close()
    await gw?.close()
  })

  it('serves the MCP endpoint over HTTPS to an SDK client that trusts the certificate', async () => {
    expect(gw.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+\/mcp$/)
    const client = new Client({ name: 'tls', version: '1.0.0' })
    const fetchWithCa = async (url: string | URL, init?: RequestInit): Promise<Response> => {
      const options = { ...init, dispatcher: agent } as Parameters<typeof undiciFetch>[1]
      return await undiciFetch(url, options) as unknown as Response
    }
    await client.connect(new StreamableHTTPClientTransport(new URL(gw.url), { fetch: fetchWithCa }))
    try {
      const tools = await client.listTools()
      expect(tools.tools.map((tool) => tool.name)).toContain('demo__echo')
      const result = await client.callTool({ name: 'demo__echo', arguments: { text: 'over tls' } })
      expect(textOf(result)).toContain('over tls')
    } finally {
      await client.close()
    }
  })

  it('refuses a client that does not trust the certificate, and plain HTTP', async () => {
    await expect(undiciFetch(`${gw.base}/healthz`)).rejects.toThrow()
    const plain = gw.base.replace('https://', 'http://')
    await expect(undiciFetch(`${plain}/healthz`)).rejects.toThrow()
    const trusted = await undiciFetch(`${gw.base}/healthz`, { dispatcher: agent })
    expect(trusted.status).toBe(200)
  })
})

describe('server.tls.ca', () => {
  it('sends the intermediates it names, so that a client trusting only the root accepts a certificate without them', async () => {
    const agent = new Agent({ connect: { ca: readFileSync(chain.root) } })
    const withoutCa = await startGateway({ upstreams: [demoStdio()], server: { tls: { cert: chain.cert, key: chain.key } } })
    const tls = { cert: chain.cert, key: chain.key, ca: chain.intermediate }
    const withCa = await startGateway({ upstreams: [demoStdio()], server: { tls } })
    try {
      await expect(undiciFetch(`${withoutCa.base}/healthz`, { dispatcher: agent })).rejects.toMatchObject({ cause: { code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' } })
      expect((await undiciFetch(`${withCa.base}/healthz`, { dispatcher: agent })).status).toBe(200)
    } finally {
      await agent.close()
      await withoutCa.close()
      await withCa.close()
    }
  })
})

describe('TLS on the admin listener (admin.tls)', () => {
  it('serves the admin API over HTTPS with its own certificate, still behind the admin token, while the MCP listener stays plain', async () => {
    const agent = new Agent({ connect: { ca: readFileSync(other.cert) } })
    const gw = await startGateway({ upstreams: [demoStdio()], admin: { port: 0, tokenSha256: sha256Hex('admin-token-tls-0123'), tls: other } })
    try {
      const admin = gw.gateway.admin!
      const address = await admin.listen({ host: '127.0.0.1', port: 0 })
      expect(address).toMatch(/^https:\/\//)
      const upstreams = await undiciFetch(`${address}/admin/upstreams`, { dispatcher: agent, headers: { authorization: 'Bearer admin-token-tls-0123' } })
      expect(upstreams.status).toBe(200)
      expect(await upstreams.json()).toMatchObject({ upstreams: [{ name: 'demo' }] })
      expect((await undiciFetch(`${address}/admin/upstreams`, { dispatcher: agent })).status).toBe(401)
      await expect(undiciFetch(`${address.replace('https://', 'http://')}/admin/upstreams`)).rejects.toThrow()
      expect(gw.url).toMatch(/^http:\/\//)
    } finally {
      await agent.close()
      await gw.close()
    }
  })
})

describe('tls files that cannot be used', () => {
  const start = async (tls: Record<string, string>, adminTls?: Record<string, string>): Promise<unknown> => {
    const admin = adminTls === undefined ? {} : { admin: { port: 0, tokenSha256: sha256Hex('admin-token-tls-0123'), tls: adminTls } }
    const config = parseConfig({ store: { kind: 'memory' }, upstreams: [demoStdio()], server: { port: 0, tls }, ...admin })
    const gateway = await buildGateway(config)
    await gateway.close()
    return gateway
  }

  it('stops the start with GW_ERR_CONFIG_INVALID naming each file that cannot be read', async () => {
    const missingCert = join(dir, 'missing.crt')
    const missingKey = join(dir, 'missing.key')
    const failure = start({ cert: missingCert, key: missingKey })
    await expect(failure).rejects.toMatchObject({ code: 'GW_ERR_CONFIG_INVALID' })
    await expect(failure).rejects.toThrow(`server.tls.cert: cannot read '${missingCert}'`)
    await expect(failure).rejects.toThrow(`server.tls.key: cannot read '${missingKey}'`)
  })

  it('names the problems of server.tls and admin.tls together', async () => {
    const missingKey = join(dir, 'missing.key')
    const failure = start({ cert: server.cert, key: missingKey }, { cert: server.cert, key: other.key })
    await expect(failure).rejects.toThrow(`server.tls.key: cannot read '${missingKey}'`)
    await expect(failure).rejects.toThrow('admin.tls: the certificate and key cannot be used')
  })

  it('stops the start with GW_ERR_CONFIG_INVALID when the key does not belong to the certificate', async () => {
    const failure = start({ cert: server.cert, key: other.key })
    await expect(failure).rejects.toMatchObject({ code: 'GW_ERR_CONFIG_INVALID', message: expect.stringContaining('server.tls: ') })
  })
})
