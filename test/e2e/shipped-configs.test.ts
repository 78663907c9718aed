// The configurations compose.yaml and deploy/kubernetes/ ship, run as they are (ports and the upstream's path
// aside) on a Redis that wants a password: a client with a token is served, one without is refused, and the
// metrics want the admin token.
import { readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parse } from 'yaml'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { textOf } from '../helpers/clients.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { privateRedis, stopRedis, type PrivateRedis } from '../helpers/private-redis.ts'

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url))
const PASSWORD = 'a-redis-password-from-openssl-rand'
const STATE_SECRET = 'a-state-secret-of-at-least-32-characters'
const TOKEN = 'the-token-alice-was-given-by-her-operator'
const ADMIN_TOKEN = 'the-admin-token-only-prometheus-and-operators-hold'

const read = async (file: string): Promise<string> => await readFile(`${REPO_ROOT}${file}`, 'utf8')

/** The shipped YAML with the test's free ports and the compiled demo upstream (`node dist/demo/main.js` in the image). */
function runnable (text: string): Record<string, unknown> {
  const raw = parse(text) as { server: object, admin?: object, upstreams: unknown[] }
  return {
    ...raw,
    server: { ...raw.server, port: 0 },
    ...(raw.admin !== undefined && { admin: { ...raw.admin, port: 0 } }),
    upstreams: [demoStdio()],
  }
}

async function client (url: string, token: string | undefined, host?: string): Promise<Client> {
  const headers: Record<string, string> = { ...(token !== undefined && { authorization: `Bearer ${token}` }), ...(host !== undefined && { host }) }
  const sdk = new Client({ name: 'operator-check', version: '1.0.0' })
  await sdk.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }))
  return sdk
}

let redis: PrivateRedis | undefined
beforeAll(async () => { redis = await privateRedis('noeviction', undefined, PASSWORD) })
afterAll(async () => { await stopRedis(redis) })

describe('the configuration deploy/kubernetes/configmap.yaml holds', () => {
  let gateway: RunningGateway
  beforeAll(async () => {
    const text = (parse(await read('deploy/kubernetes/configmap.yaml')) as { data: Record<string, string> }).data['gateway.yaml']!
    // What the Deployment sets from the Secret.
    gateway = await startGateway(runnable(text), {
      GATEWAY_STATE_SECRET: STATE_SECRET,
      REDIS_URL: redis!.url,
      ALICE_TOKEN_SHA256: sha256Hex(TOKEN),
      ADMIN_TOKEN_SHA256: sha256Hex(ADMIN_TOKEN),
    })
  })
  afterAll(async () => { await gateway.close() })

  it('serves a client with its token, on Redis behind its password, and refuses one without', async () => {
    const ready = await gateway.app.inject({ url: '/readyz' })
    expect(ready.json()).toMatchObject({ status: 'ready', store: { ok: true, kind: 'redis' } })
    const alice = await client(gateway.url, TOKEN)
    expect(textOf(await alice.callTool({ name: 'demo__echo', arguments: { text: 'through the Service' } }))).toBe('through the Service')
    await alice.close()
    await expect(client(gateway.url, undefined)).rejects.toThrow(/Unauthorized/)
    await expect(client(gateway.url, 'a-token-nobody-was-given')).rejects.toThrow(/Unauthorized/)
  })

  it('lets in clients that name the Service', async () => {
    const inCluster = await client(gateway.url, TOKEN, 'mcp-task-gateway.mcp-task-gateway.svc:8080')
    expect((await inCluster.listTools()).tools.map((t) => t.name)).toContain('demo__echo')
    await inCluster.close()
  })

  it('serves the metrics on the admin listener to the admin token only', async () => {
    const admin = gateway.gateway.admin!
    expect((await admin.inject({ url: '/metrics' })).statusCode).toBe(401)
    expect((await admin.inject({ url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } })).statusCode).toBe(401)
    const metrics = await admin.inject({ url: '/metrics', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    expect(metrics.statusCode).toBe(200)
    expect(metrics.body).toContain('gateway_upstream_up{upstream="demo"} 1')
  })
})

describe('the configuration compose.yaml hands over as a secret', () => {
  /** What compose sets from the operator's shell (compose.yaml's environment, Redis at the test's address). */
  const env = (): Record<string, string> => ({ GATEWAY_STATE_SECRET: STATE_SECRET, REDIS_URL: redis!.url, GATEWAY_SHUTDOWN_GRACE: '20s' })

  it('refuses every token until the placeholder hash is replaced', async () => {
    const gateway = await startGateway(runnable(await read('deploy/compose/gateway.yaml')), env())
    try {
      expect((await gateway.app.inject({ url: '/readyz' })).json()).toMatchObject({ status: 'ready', store: { kind: 'redis' } })
      await expect(client(gateway.url, TOKEN)).rejects.toThrow(/Unauthorized/)
      await expect(client(gateway.url, '')).rejects.toThrow(/Unauthorized/)
    } finally {
      await gateway.close()
    }
  })

  it('serves the client whose token hash replaced it', async () => {
    const text = (await read('deploy/compose/gateway.yaml')).replace(/"0{64}"/, `"${sha256Hex(TOKEN)}"`)
    const gateway = await startGateway(runnable(text), env())
    try {
      const alice = await client(gateway.url, TOKEN)
      expect(textOf(await alice.callTool({ name: 'demo__echo', arguments: { text: 'through compose' } }))).toBe('through compose')
      await alice.close()
    } finally {
      await gateway.close()
    }
  })
})
