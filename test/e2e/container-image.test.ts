// The Docker image, built from the project's Dockerfile and started as an operator would (buildah: see
// test/helpers/image.ts): a configuration of one's own mounted over the image's, a data volume, the image's
// own HEALTHCHECK command, its user, and `docker stop` (SIGTERM to the container's first process).
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { execFileSync } from 'node:child_process'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Agent, fetch as undiciFetch } from 'undici'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { textOf } from '../helpers/clients.ts'
import { buildImage, imageConfig, nodeBaseImage, requireBuildah, startContainer, type ImageConfig, type RunningContainer } from '../helpers/image.ts'
import { freePort } from '../helpers/private-redis.ts'
import { loggedLine } from '../helpers/process.ts'
import { legacyTask, RawSession } from '../helpers/raw-session.ts'
import { runTask } from '../helpers/tasks.ts'

const TOKEN = 'container-image-test-token'
const AUTH = { authorization: `Bearer ${TOKEN}` }
/** The uid of the base image's `node` user, which the official node images have too. */
const NODE_UID = 1000
const SHUTDOWN = 'the gateway is shutting down; retry on another instance'

/** An operator's configuration: auth on, every interface, a SQLite store on the data volume, the demo upstream. */
function gatewayYaml (tls = false): string {
  return `
server:
  host: 0.0.0.0
  port: \${GATEWAY_PORT:-8080}
  shutdownGrace: \${GATEWAY_SHUTDOWN_GRACE:-10s}
${tls ? '  tls: { cert: /etc/mcp-task-gateway/tls/server.crt, key: /etc/mcp-task-gateway/tls/server.key }\n' : ''}store:
  kind: sqlite
  path: \${GATEWAY_DATA_DIR:-./data}/gateway.db
auth:
  tokens:
    - principal: ops
      sha256: ${sha256Hex(TOKEN)}
upstreams:
  - name: demo
    transport: stdio
    command: node
    args: [dist/demo/main.js]
  - name: again
    transport: stdio
    command: node
    args: [dist/demo/main.js]
    tools: { allow: [slow] }
    prompts: { deny: ['*'] }
    resources: { deny: ['*'] }
    toolSettings:
      slow: { idempotent: true }
`
}

/**
 * What an operator prepares on the host: a configuration directory (the file, and with TLS its certificate
 * and a key only the node user may read) and a data directory the node user owns.
 */
function hostFiles (tls: boolean): { etc: string, data: string } {
  const dir = mkdtempSync(join(tmpdir(), 'gw-image-'))
  chmodSync(dir, 0o755)
  const etc = join(dir, 'etc')
  mkdirSync(join(etc, 'tls'), { recursive: true, mode: 0o755 })
  writeFileSync(join(etc, 'gateway.yaml'), gatewayYaml(tls))
  const data = join(dir, 'data')
  mkdirSync(data)
  chownSync(data, NODE_UID, NODE_UID)
  if (tls) {
    const key = join(etc, 'tls', 'server.key')
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
      '-keyout', key, '-out', join(etc, 'tls', 'server.crt'), '-subj', '/CN=gateway.example',
      '-addext', 'subjectAltName=DNS:gateway.example,IP:127.0.0.1'], { stdio: 'ignore' })
    chownSync(key, NODE_UID, NODE_UID)
    chmodSync(key, 0o600)
  }
  return { etc, data }
}

type HostFiles = ReturnType<typeof hostFiles>

/** The image started as `docker run -e GATEWAY_PORT=… -v <etc>:/etc/mcp-task-gateway:ro -v <data>:/app/data` would. */
async function start (image: ImageConfig, files: HostFiles, env: Record<string, string> = {}): Promise<RunningContainer> {
  const port = await freePort()
  return await startContainer(image, {
    env: { GATEWAY_PORT: String(port), ...env },
    volumes: [`${files.etc}:/etc/mcp-task-gateway:ro`, `${files.data}:/app/data`],
  })
}

async function connect (url: string): Promise<Client> {
  const client = new Client({ name: 'container-image', version: '1.0.0' })
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: AUTH } }))
  return client
}

let image: ImageConfig

beforeAll(async () => {
  requireBuildah()
  // Cold: about 1 min for the base image (debootstrap) and several for the project's (npm ci, better-sqlite3
  // compiled); warm, both come from buildah's storage and its layer cache.
  await buildImage(await nodeBaseImage())
  image = await imageConfig()
  console.info(`container image: ${image.size}`)
}, 1_800_000)

describe('the container image', () => {
  let container: RunningContainer
  let files: HostFiles

  beforeAll(async () => {
    files = hostFiles(false)
    container = await start(image, files, { GATEWAY_SHUTDOWN_GRACE: '2s' })
  })

  afterAll(async () => {
    if (container.child.exitCode === null) process.kill(container.initPid(), 'SIGTERM')
    await container.exited
  })

  it('runs the gateway as the non-root node user, its store on the data volume', () => {
    expect(image.user).toBe('node')
    expect(container.gatewayUid()).toBe(NODE_UID)
    expect(statSync(join(files.data, 'gateway.db')).uid).toBe(NODE_UID)
  })

  it('answers /healthz and /readyz, and nothing on /mcp without a token', async () => {
    const origin = new URL(container.url).origin
    expect(await (await fetch(`${origin}/healthz`)).json()).toEqual({ status: 'ok' })
    const ready = await fetch(`${origin}/readyz`)
    expect(ready.status).toBe(200)
    expect(await ready.json()).toMatchObject({ status: 'ready', store: { ok: true, kind: 'sqlite' } })
    const anonymous = await fetch(container.url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{}' })
    expect(anonymous.status).toBe(401)
  })

  it('serves a plain call and a task to an SDK client', async () => {
    const client = await connect(container.url)
    try {
      expect(textOf(await client.callTool({ name: 'demo__echo', arguments: { text: 'from the image' } }))).toContain('from the image')
      const task = await runTask(client, 'demo__slow', { duration: 50, steps: 2 })
      expect(task.taskId).toBeDefined()
      expect(task.error).toBeUndefined()
      expect(textOf(task.result)).toContain('slow finished: 2 steps')
      expect((await client.experimental.tasks.getTask(task.taskId!)).status).toBe('completed')
    } finally {
      await client.close()
    }
  })

  it('passes its own HEALTHCHECK command', async () => {
    expect(image.healthcheck[0]).toBe('CMD')
    expect(await container.exec(image.healthcheck.slice(1))).toEqual({ code: 0, output: '' })
  })

  it('on SIGTERM exits 0 after its grace, fails the plain task still running and hands the idempotent one to the next start', async () => {
    const session = await RawSession.open(container.url, {}, AUTH)
    const plain = await legacyTask(session, 'demo__slow', { duration: 600_000, steps: 600 }, 600_000)
    const idempotent = await legacyTask(session, 'again__slow', { duration: 600_000, steps: 600 }, 600_000)
    await session.waitFor(plain, ['working'])
    await session.waitFor(idempotent, ['working'])

    process.kill(container.initPid(), 'SIGTERM')
    await loggedLine(container, '"shutting down"')
    expect(JSON.parse(await loggedLine(container, '"handed running tasks over"'))).toMatchObject({ handedOver: 1, to: 'the next process on the store' })
    expect(await container.exited).toEqual([0, null])
    const unhealthy = await container.exec(image.healthcheck.slice(1))
    expect(unhealthy.code).toBe(1)
    expect(unhealthy.output).toContain('unhealthy: http://127.0.0.1:')

    // The next container on the same volume: the store in it says what became of both. Its own stop waits out its
    // grace for the task it runs again: a short one, as the first container's.
    const next = await start(image, files, { GATEWAY_SHUTDOWN_GRACE: '2s' })
    try {
      const after = await RawSession.open(next.url, {}, AUTH)
      expect((await after.request('tasks/get', { taskId: plain })).result).toMatchObject({ status: 'failed', statusMessage: SHUTDOWN })
      expect((await after.request('tasks/get', { taskId: idempotent })).result)
        .toMatchObject({ status: 'working', statusMessage: 'running again after a gateway restart' })
    } finally {
      process.kill(next.initPid(), 'SIGTERM')
      expect(await next.exited).toEqual([0, null])
    }
  })
})

describe('the container image with server.tls', () => {
  it('serves HTTPS and passes its own HEALTHCHECK command', async () => {
    const files = hostFiles(true)
    const container = await start(image, files)
    try {
      expect(container.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+\/mcp$/)
      const agent = new Agent({ connect: { ca: readFileSync(join(files.etc, 'tls', 'server.crt')) } })
      const health = await undiciFetch(`${new URL(container.url).origin}/healthz`, { dispatcher: agent })
      expect(health.status).toBe(200)
      await agent.close()
      expect(await container.exec(image.healthcheck.slice(1))).toEqual({ code: 0, output: '' })
    } finally {
      process.kill(container.initPid(), 'SIGTERM')
      expect(await container.exited).toEqual([0, null])
    }
  })
})
