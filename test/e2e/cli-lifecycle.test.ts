import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { describe, expect, it } from 'vitest'
import { McpError } from '@modelcontextprotocol/sdk/types.js'
import { connectV1, textOf } from '../helpers/clients.ts'
import { REPO_ROOT } from '../fixtures/spawn-upstream.ts'
import { DEMO_MAIN, GATEWAY_MAIN } from '../helpers/built.ts'
import { demoStdioYaml, loggedLine, startGatewayProcess, writeConfig } from '../helpers/process.ts'

function config (grace: string): string {
  return `
server: { shutdownGrace: ${grace} }
store: { kind: memory }
logging: { level: info }
upstreams:
  - name: demo
    transport: stdio
    command: ${JSON.stringify(process.execPath)}
    args: [${DEMO_MAIN}]
`
}

/** The real CLI process: start, SIGTERM with calls in flight, exit code. */
describe('the gateway process', () => {
  it('lets an in-flight call finish on SIGTERM, refuses new work, and exits 0', async () => {
    const gw = await startGatewayProcess(writeConfig(config('20s')))
    const client = await connectV1(gw.url)
    let progressed!: () => void
    const started = new Promise<void>((resolve) => { progressed = resolve })
    const call = client.callTool({ name: 'demo__slow', arguments: { duration: 1500, steps: 15 } }, undefined, { onprogress: () => progressed() })
    await started
    gw.child.kill('SIGTERM')
    // The process logs this as it starts to drain: from then on new work is refused.
    await loggedLine(gw, '"shutting down"')
    const refused = await fetch(gw.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'late', version: '1' } } }),
    })
    expect(refused.status).toBe(503)
    const result = await call
    expect(textOf(result)).toContain('15 steps')
    const [code] = await gw.exited
    expect(code).toBe(0)
  })

  it('cancels calls still running when the grace period ends, then exits 0', async () => {
    const gw = await startGatewayProcess(writeConfig(config('300ms')))
    const client = await connectV1(gw.url)
    let progressed!: () => void
    const started = new Promise<void>((resolve) => { progressed = resolve })
    const call = client.callTool({ name: 'demo__slow', arguments: { duration: 60_000, steps: 600 } }, undefined, { onprogress: () => progressed() })
    await started
    gw.child.kill('SIGTERM')
    const error = await call.catch((e: unknown) => e)
    expect(error).toBeInstanceOf(McpError)
    expect((error as McpError).message).toContain('shutting down')
    const [code] = await gw.exited
    expect(code).toBe(0)
  })
})

/** The gateway listens before its upstreams are up; names that collide once they are stop it. */
describe('the gateway process at start', () => {
  it('exits 1 naming both upstreams when their names collide', async () => {
    const file = writeConfig(`store: { kind: memory }\nupstreams:\n${demoStdioYaml('one')}\n    prefix: ''\n${demoStdioYaml('two')}\n    prefix: ''\n`)
    const child = spawn(process.execPath, [GATEWAY_MAIN, '--config', file, '--port', '0'], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString('utf8') })
    let stdout = ''
    child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString('utf8') })
    const [code] = await once(child, 'exit')
    expect(code).toBe(1)
    expect(stdout).toContain('"gateway listening"')
    expect(stderr).toMatch(/tools 'echo' is offered by upstream 'one' and by upstream 'two'/)
  })

  it('exits 2, as for any configuration problem, when a server.tls file cannot be read', async () => {
    const file = writeConfig(`server: { tls: { cert: ./missing.crt, key: ./missing.key } }\nstore: { kind: memory }\nupstreams:\n${demoStdioYaml('one')}\n`)
    const child = spawn(process.execPath, [GATEWAY_MAIN, '--config', file, '--port', '0'], { cwd: REPO_ROOT, stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString('utf8') })
    const [code] = await once(child, 'exit')
    expect(code).toBe(2)
    expect(stderr).toContain('server.tls.cert')
  })
})

/** The built package exactly as `npm start` and the Docker image run it: dist/main.js on config/gateway.yaml. */
describe('the built CLI on the default configuration', () => {
  it('serves the bundled demo upstream from a sqlite store and stops cleanly', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'gw-data-'))
    const child = spawn(process.execPath, ['dist/main.js', '--config', 'config/gateway.yaml', '--port', '0', '--log-level', 'info'], {
      cwd: REPO_ROOT,
      env: { ...process.env, GATEWAY_DATA_DIR: dataDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    const exited = once(child, 'exit')
    const url = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout! }).on('line', (line) => {
        if (line.includes('"gateway listening"')) resolve((JSON.parse(line) as { address: string }).address)
      })
      void exited.then(([code]) => reject(new Error(`exited with ${String(code)}`)))
    })
    const client = await connectV1(url)
    expect(textOf(await client.callTool({ name: 'demo__echo', arguments: { text: 'hello' } }))).toBe('hello')
    await client.close()
    expect(existsSync(join(dataDir, 'gateway.db'))).toBe(true)
    child.kill('SIGTERM')
    const [code] = await exited
    expect(code).toBe(0)
  })
})
