// The container image's HEALTHCHECK command (`node dist/healthcheck.js --config <file>`) against real gateway
// processes: it finds the gateway from the configuration file alone, over HTTPS when that has server.tls.
// The image runs the same command: container-image.test.ts.
import { execFile, execFileSync } from 'node:child_process'
import { chmodSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { loadConfig } from '../../src/config/load.ts'
import { checkHealth, healthTarget } from '../../src/http/health-probe.ts'
import { REPO_ROOT } from '../fixtures/spawn-upstream.ts'
import { demoStdioYaml, startGatewayProcess, stopAll, writeConfig } from '../helpers/process.ts'
import { freePort } from '../helpers/private-redis.ts'

const HEALTHCHECK = 'dist/healthcheck.js'

/** A self-signed certificate for localhost and 127.0.0.1 (the openssl CLI), readable by the gateway. */
function certificate (dir: string, name: string): { cert: string, key: string } {
  const cert = join(dir, `${name}.crt`)
  const key = join(dir, `${name}.key`)
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
    '-keyout', key, '-out', cert, '-subj', '/CN=gateway.example', '-addext', 'subjectAltName=DNS:gateway.example',
  ], { stdio: 'ignore' })
  chmodSync(key, 0o600)
  return { cert, key }
}

function config (port: number, tls?: { cert: string, key: string }): string {
  return `
server:
  port: ${port}
${tls === undefined ? '' : `  tls: { cert: ${JSON.stringify(tls.cert)}, key: ${JSON.stringify(tls.key)} }\n`}store: { kind: memory }
upstreams:
${demoStdioYaml()}
`
}

/** Runs the health check as the image does, with the environment given; its exit code and what it wrote. */
async function healthcheck (file: string, env: NodeJS.ProcessEnv = {}): Promise<{ code: number, stderr: string }> {
  try {
    const { stderr } = await promisify(execFile)(process.execPath, [HEALTHCHECK, '--config', file], { cwd: REPO_ROOT, env: { ...process.env, ...env } })
    return { code: 0, stderr }
  } catch (err) {
    const failed = err as { code: number, stderr: string }
    return { code: failed.code, stderr: failed.stderr }
  }
}

describe('the health check command', () => {
  it('passes against the plain HTTP gateway of its configuration and fails once that gateway stopped', async () => {
    const port = await freePort()
    const file = writeConfig(config(port))
    const gateway = await startGatewayProcess(file, ['--port', String(port)])
    expect(await healthcheck(file)).toEqual({ code: 0, stderr: '' })
    await stopAll([gateway])
    const stopped = await healthcheck(file)
    expect(stopped.code).toBe(1)
    expect(stopped.stderr).toContain(`unhealthy: http://127.0.0.1:${port}/healthz: `)
  })

  it('asks over HTTPS when the configuration has server.tls, and passes for a certificate of another name than 127.0.0.1', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-healthcheck-'))
    const port = await freePort()
    const file = writeConfig(config(port, certificate(dir, 'server')))
    const gateway = await startGatewayProcess(file, ['--port', String(port)])
    try {
      expect(gateway.url).toBe(`https://127.0.0.1:${port}/mcp`)
      expect(await healthcheck(file)).toEqual({ code: 0, stderr: '' })
      // The probe itself, in this process.
      expect(await checkHealth(await healthTarget((await loadConfig(file)).server))).toBeUndefined()
    } finally {
      await stopAll([gateway])
    }
  })

  it('reads the port from the environment as the gateway does (GATEWAY_SERVER__PORT)', async () => {
    const port = await freePort()
    const file = writeConfig(config(1))
    const gateway = await startGatewayProcess(file, ['--port', String(port)])
    try {
      expect((await healthcheck(file)).code).toBe(1)
      expect(await healthcheck(file, { GATEWAY_SERVER__PORT: String(port) })).toEqual({ code: 0, stderr: '' })
    } finally {
      await stopAll([gateway])
    }
  })

  it('fails when the listener on that port presents another certificate than server.tls.cert', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-healthcheck-'))
    const port = await freePort()
    const impostor = await startGatewayProcess(writeConfig(config(port, certificate(dir, 'other'))), ['--port', String(port)])
    try {
      const file = writeConfig(config(port, certificate(dir, 'server')))
      const checked = await healthcheck(file)
      expect(checked.code).toBe(1)
      const mismatch = `https://127\\.0\\.0\\.1:${port} presented a certificate \\(SHA-256 [0-9A-F:]+\\) other than server\\.tls\\.cert's`
      expect(checked.stderr).toMatch(new RegExp(`^unhealthy: ${mismatch}`))
      expect(await checkHealth(await healthTarget((await loadConfig(file)).server))).toMatch(new RegExp(`^${mismatch}`))
    } finally {
      await stopAll([impostor])
    }
  })

  it('fails with the reason when the configuration cannot be read', async () => {
    const checked = await healthcheck(join(tmpdir(), 'no-such-dir', 'gateway.yaml'))
    expect(checked.code).toBe(1)
    expect(checked.stderr).toMatch(/^unhealthy: .*gateway\.yaml/)
  })
})
