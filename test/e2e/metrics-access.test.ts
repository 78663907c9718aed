import { execFileSync } from 'node:child_process'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { DEMO_MAIN } from '../helpers/built.ts'
import { connectV1 } from '../helpers/clients.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'

const ADMIN_TOKEN = 'admin-token-metrics-7c1d'
const READ_TOKEN = 'read-token-metrics-2b9e'
const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` })

function adminOf (gw: RunningGateway): FastifyInstance {
  const admin = gw.gateway.admin
  if (admin === undefined) throw new Error('the admin API is not configured')
  return admin
}

async function adminCall (gw: RunningGateway, method: 'GET' | 'POST', url: string, token: string): Promise<LightMyRequestResponse> {
  return await adminOf(gw).inject({ method, url, headers: bearer(token) })
}

/** The value of `series` (`name{labels}`) in a scrape, undefined when absent. */
function sample (exposition: string, series: string): number | undefined {
  const line = exposition.split('\n').find((l) => l.startsWith(`${series} `))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

/** Processes of the demo upstream this test process started (the gateway runs in it, so they are its children). */
function demoProcesses (): number {
  const args = execFileSync('ps', ['--ppid', String(process.pid), '-o', 'args='], { encoding: 'utf8' })
  return args.split('\n').filter((line) => line.includes(DEMO_MAIN)).length
}

describe('a read-only credential for metrics and the admin API\'s read routes', () => {
  let gw: RunningGateway
  let client: Client

  beforeAll(async () => {
    gw = await startGateway({
      upstreams: [demoStdio()],
      admin: { port: 0, tokenSha256: sha256Hex(ADMIN_TOKEN), readTokenSha256: sha256Hex(READ_TOKEN).toUpperCase() },
    })
    client = await connectV1(gw.url)
  })
  afterAll(async () => {
    await client?.close()
    await gw?.close()
  })

  it('reads /metrics and every GET route of the admin API', async () => {
    const metrics = await adminCall(gw, 'GET', '/metrics', READ_TOKEN)
    expect(metrics.statusCode).toBe(200)
    expect(metrics.body).toContain('gateway_upstream_up{upstream="demo"} 1')
    for (const url of ['/admin/upstreams', '/admin/tasks', '/admin/survival', '/admin/problems']) {
      expect((await adminCall(gw, 'GET', url, READ_TOKEN)).statusCode, url).toBe(200)
    }
  })

  it('cannot cancel, drain or reload: 403 GW_ERR_ADMIN_READ_ONLY, and nothing happens', async () => {
    for (const url of ['/admin/drain', '/admin/reload', '/admin/tasks/some-task/cancel']) {
      const res = await adminCall(gw, 'POST', url, READ_TOKEN)
      expect(res.statusCode, url).toBe(403)
      expect(res.json(), url).toMatchObject({ error: { code: 'GW_ERR_ADMIN_READ_ONLY' } })
    }
    expect((await gw.app.inject({ method: 'GET', url: '/readyz' })).json()).toMatchObject({ status: 'ready' })
  })

  it('is refused without a token or with a client\'s, as before', async () => {
    expect((await adminOf(gw).inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(401)
    expect((await adminCall(gw, 'GET', '/metrics', 'some-other-token')).statusCode).toBe(401)
  })

  it('gateway_upstream_processes counts what the admin API counts: the processes running', async () => {
    // A call opens the client's own upstream session: a second process besides the gateway's own.
    await client.callTool({ name: 'demo__echo', arguments: { text: 'hi' } })
    const metrics = await adminCall(gw, 'GET', '/metrics', READ_TOKEN)
    const admin = (await adminCall(gw, 'GET', '/admin/upstreams', READ_TOKEN)).json<{ upstreams: Array<{ name: string, processes?: number }> }>()
    const processes = admin.upstreams.find((u) => u.name === 'demo')?.processes
    expect(processes).toBe(demoProcesses())
    expect(sample(metrics.body, 'gateway_upstream_processes{upstream="demo"}')).toBe(processes)
  })

  it('still lets the admin token drain', async () => {
    expect((await adminCall(gw, 'POST', '/admin/drain', ADMIN_TOKEN)).statusCode).toBe(200)
    expect((await gw.app.inject({ method: 'GET', url: '/readyz' })).json()).toMatchObject({ status: 'draining' })
  })
})
