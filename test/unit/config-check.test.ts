// `--check` checks what can be checked without starting an upstream: stdio commands and working directories
// that do not exist, and upstreams whose names are certain to collide.
import { execFile, execFileSync } from 'node:child_process'
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { GATEWAY_MAIN } from '../helpers/built.ts'

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url))
const execFileAsync = promisify(execFile)

describe('--check', () => {
  let dir: string

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'mcp-task-gateway-check-'))
  })
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  /** Runs `src/main.ts --check` on a YAML text with a small, known environment. */
  async function check (yaml: string): Promise<{ code: number, stdout: string, stderr: string }> {
    const file = join(dir, `gateway-${Math.random().toString(36).slice(2)}.yaml`)
    await writeFile(file, yaml)
    const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? tmpdir() }
    try {
      const { stdout, stderr } = await execFileAsync(process.execPath, [GATEWAY_MAIN, '--config', file, '--check'], { cwd: REPO_ROOT, env, timeout: 20_000 })
      return { code: 0, stdout, stderr }
    } catch (err) {
      const failed = err as { code?: unknown, stdout?: string, stderr?: string }
      if (typeof failed.code !== 'number') throw err
      return { code: failed.code, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' }
    }
  }

  it('fails on stdio commands and working directories that do not exist, naming each path', async () => {
    const result = await check([
      'upstreams:',
      '  - { name: a, transport: stdio, command: mcp-server-that-is-not-installed }',
      `  - { name: b, transport: stdio, command: ${JSON.stringify(join(dir, 'missing-server'))} }`,
      `  - { name: c, transport: stdio, command: node, cwd: ${JSON.stringify(join(dir, 'no-such-dir'))} }`,
      '',
    ].join('\n'))
    expect(result.code).toBe(2)
    expect(result.stderr).toMatch(/upstreams\[0\]\.command: 'mcp-server-that-is-not-installed' is not found on the PATH/)
    expect(result.stderr).toMatch(/upstreams\[1\]\.command: '.*missing-server' does not exist/)
    expect(result.stderr).toMatch(/upstreams\[2\]\.cwd: '.*no-such-dir' is not a directory/)
  })

  it('fails on server.tls and admin.tls files that cannot be read, naming each path', async () => {
    const cert = join(dir, 'missing.crt')
    const key = join(dir, 'missing.key')
    const tls = `tls: { cert: ${JSON.stringify(cert)}, key: ${JSON.stringify(key)} }`
    const result = await check(`server:\n  ${tls}\nadmin:\n  port: 0\n  tokenSha256: ${'a'.repeat(64)}\n  ${tls}\nupstreams:\n  - { name: a, transport: stdio, command: node }\n`)
    expect(result.code).toBe(2)
    expect(result.stderr).toContain(`server.tls.cert: cannot read '${cert}'`)
    expect(result.stderr).toContain(`server.tls.key: cannot read '${key}'`)
    expect(result.stderr).toContain(`admin.tls.cert: cannot read '${cert}'`)
    expect(result.stderr).toContain(`admin.tls.key: cannot read '${key}'`)
  })

  it('fails on a TLS key that is not its certificate\'s, naming both paths', async () => {
    const pair = (name: string): { cert: string, key: string } => {
      const cert = join(dir, `${name}.crt`)
      const key = join(dir, `${name}.key`)
      execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1', '-subj', '/CN=localhost', '-keyout', key, '-out', cert], { stdio: 'ignore' })
      return { cert, key }
    }
    const one = pair('one')
    const two = pair('two')
    const upstream = 'upstreams:\n  - { name: a, transport: stdio, command: node }\n'
    const mismatched = await check(`server:\n  tls: { cert: ${JSON.stringify(one.cert)}, key: ${JSON.stringify(two.key)} }\n${upstream}`)
    expect(mismatched.code).toBe(2)
    expect(mismatched.stderr).toContain(`server.tls.key: the key '${two.key}' does not belong to the certificate '${one.cert}' (server.tls.cert)`)
    const swapped = await check(`server:\n  tls: { cert: ${JSON.stringify(one.key)}, key: ${JSON.stringify(one.cert)} }\n${upstream}`)
    expect(swapped.code).toBe(2)
    expect(swapped.stderr).toContain(`server.tls.cert: '${one.key}' holds no PEM certificate`)
    const matching = await check(`server:\n  tls: { cert: ${JSON.stringify(one.cert)}, key: ${JSON.stringify(one.key)} }\n${upstream}`)
    expect(matching.stderr).toBe('')
    expect(matching.code).toBe(0)
  })

  it('fails on --host opening a configuration without auth to other machines, and names what to set', async () => {
    const file = join(dir, 'loopback.yaml')
    await writeFile(file, 'upstreams:\n  - { name: a, transport: stdio, command: node }\n')
    const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? tmpdir() }
    const failed = await execFileAsync(process.execPath, [GATEWAY_MAIN, '--config', file, '--host', '0.0.0.0', '--check'], { cwd: REPO_ROOT, env, timeout: 20_000 })
      .then(() => ({ code: 0, stderr: '' }), (err: { code: number, stderr: string }) => err)
    expect(failed.code).toBe(2)
    expect(failed.stderr).toContain("--host (server.host): '0.0.0.0' is reachable from other machines and auth is off")
    expect(failed.stderr).toContain('server.allowUnauthenticated: true')
  })

  it('fails on a command that is not executable', async () => {
    const script = join(dir, 'server.sh')
    await writeFile(script, '#!/bin/sh\n')
    await chmod(script, 0o644)
    const result = await check(`upstreams:\n  - { name: a, transport: stdio, command: ${JSON.stringify(script)} }\n`)
    expect(result.code).toBe(2)
    expect(result.stderr).toMatch(/upstreams\[0\]\.command: '.*server\.sh' is not executable/)
  })

  it('fails on two upstreams that run the same server with the same prefix, whose every name collides', async () => {
    const demo = 'transport: stdio, command: node, args: [dist/demo/main.js]'
    const result = await check(`upstreams:\n  - { name: one, prefix: '', ${demo} }\n  - { name: two, prefix: '', ${demo} }\n  - { name: three, ${demo} }\n`)
    expect(result.code).toBe(2)
    expect(result.stderr).toContain("upstreams[1].prefix: upstream 'two' runs the same server as 'one' under the same prefix ''")
    expect(result.stderr).not.toContain('upstreams[2]')
  })

  it('passes commands found on the PATH, relative to cwd, and upstreams that share a prefix but run different servers', async () => {
    const script = join(dir, 'run-server')
    await writeFile(script, '#!/bin/sh\n')
    await chmod(script, 0o755)
    const result = await check([
      'upstreams:',
      "  - { name: one, prefix: '', transport: stdio, command: node, args: [dist/demo/main.js] }",
      "  - { name: two, prefix: '', transport: stdio, command: node, args: [other.js] }",
      `  - { name: three, transport: stdio, command: ./run-server, cwd: ${JSON.stringify(dir)} }`,
      '',
    ].join('\n'))
    expect(result.stderr).toBe('')
    expect(result.code).toBe(0)
    expect(result.stdout).toContain('configuration is valid (3 upstreams)')
  })
})
