// `--check` checks what can be checked without starting an upstream: stdio commands, their scripts and working
// directories that do not exist, upstreams whose names are certain to collide, permissions and listeners that
// cannot work as written, and which GATEWAY_… environment variables it applied.
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
  async function check (yaml: string, variables: Record<string, string> = {}): Promise<{ code: number, stdout: string, stderr: string }> {
    const file = join(dir, `gateway-${Math.random().toString(36).slice(2)}.yaml`)
    await writeFile(file, yaml)
    const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? tmpdir(), ...variables }
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

  it('warns of an upstream with forwardAuthorization, naming it, and still passes', async () => {
    const result = await check('upstreams:\n  - { name: mail, transport: streamable-http, url: "http://127.0.0.1:9/mcp", forwardAuthorization: true }\n')
    expect(result.code).toBe(0)
    expect(result.stderr).toMatch(/^warning: upstreams\[0\]\.forwardAuthorization: upstream 'mail' is sent each caller's own Authorization header \(forwardAuthorization\): a token issued for the gateway reaches another server/m)
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
    const other = join(dir, 'other.js')
    await writeFile(other, '')
    const result = await check([
      'upstreams:',
      "  - { name: one, prefix: '', transport: stdio, command: node, args: [dist/demo/main.js] }",
      `  - { name: two, prefix: '', transport: stdio, command: node, args: [${JSON.stringify(other)}] }`,
      `  - { name: three, transport: stdio, command: ./run-server, cwd: ${JSON.stringify(dir)} }`,
      '',
    ].join('\n'))
    expect(result.stderr).toBe('')
    expect(result.code).toBe(0)
    expect(result.stdout).toContain('configuration is valid (3 upstreams)')
  })

  it('fails on a permission naming an upstream that does not exist, or a pattern that matches none', async () => {
    const result = await check([
      'auth:',
      `  tokens: [{ principal: alice, sha256: ${'a'.repeat(64)}, scopes: [read] }]`,
      '  permissions:',
      '    - { scope: read, upstreams: [demo, serach, "web-*"] }',
      'upstreams:',
      '  - { name: demo, transport: stdio, command: node }',
      '  - { name: search, transport: stdio, command: node, args: [-e, "0"] }',
      '',
    ].join('\n'))
    expect(result.code).toBe(2)
    expect(result.stderr).toContain("auth.permissions[0].upstreams[1]: no upstream is named 'serach' (upstreams: demo, search)")
    expect(result.stderr).toContain("auth.permissions[0].upstreams[2]: 'web-*' matches no upstream (upstreams: demo, search)")
    expect(result.stderr).not.toContain('upstreams[0]:')
  })

  it('fails on metrics written for the admin listener when no admin listener is configured', async () => {
    const upstream = 'upstreams:\n  - { name: a, transport: stdio, command: node }\n'
    const failed = await check(`metrics: { path: /prom }\n${upstream}`)
    expect(failed.code).toBe(2)
    expect(failed.stderr).toContain('metrics.listener: metrics are served on the admin listener (listener: admin, the default), and no admin listener is configured')
    for (const fine of ['', 'metrics: { enabled: false }\n', 'metrics: { listener: main }\n', `admin: { port: 0, tokenSha256: ${'a'.repeat(64)} }\nmetrics: { path: /prom }\n`]) {
      const result = await check(`${fine}${upstream}`)
      expect(result.stderr, fine).toBe('')
      expect(result.code, fine).toBe(0)
    }
  })

  it('fails on an admin port equal to the MCP port on the same host, or on a wildcard address', async () => {
    const upstream = 'upstreams:\n  - { name: a, transport: stdio, command: node }\n'
    const admin = (host: string, port: number): string => `admin: { host: ${JSON.stringify(host)}, port: ${port}, tokenSha256: ${'a'.repeat(64)} }\n`
    const same = await check(`server: { port: 9000 }\n${admin('127.0.0.1', 9000)}${upstream}`)
    expect(same.code).toBe(2)
    expect(same.stderr).toContain("admin.port: 9000 is the MCP listener's port too (server.port) on 127.0.0.1")
    const wildcard = await check(`server: { port: 9000 }\n${admin('0.0.0.0', 9000)}${upstream}`)
    expect(wildcard.code).toBe(2)
    expect(wildcard.stderr).toContain('admin.port: 9000 is the MCP listener')
    for (const fine of [`server: { port: 0 }\n${admin('127.0.0.1', 0)}`, `server: { port: 9000 }\n${admin('127.0.0.2', 9000)}`, `server: { port: 9000 }\n${admin('127.0.0.1', 9001)}`]) {
      const result = await check(`${fine}${upstream}`)
      expect(result.stderr, fine).toBe('')
      expect(result.code, fine).toBe(0)
    }
  })

  it('fails on the script of a node or python upstream that does not exist; leaves flags, package names and code alone', async () => {
    const result = await check([
      'upstreams:',
      '  - { name: a, transport: stdio, command: node, args: [dist/no-such-server.js] }',
      `  - { name: b, transport: stdio, command: python3, args: [-u, ${JSON.stringify(join(dir, 'server.py'))}, --port, "1"] }`,
      '  - { name: c, transport: stdio, command: node, args: [--enable-source-maps, ./missing/main.mjs, ./data] }',
      '  - { name: d, transport: stdio, command: npx, args: [-y, "@modelcontextprotocol/server-memory", ./not-a-script.js] }',
      '  - { name: e, transport: stdio, command: node, args: [-e, "require(\'./x.js\')", ./y.js] }',
      '  - { name: f, transport: stdio, command: python3, args: [-m, mcp_server_time, ./z.py] }',
      '  - { name: g, transport: stdio, command: node, args: [--import, tsx, dist/demo/main.js] }',
      '',
    ].join('\n'))
    expect(result.code).toBe(2)
    expect(result.stderr).toContain("upstreams[0].args[0]: the script 'dist/no-such-server.js' does not exist (relative to the gateway's working directory)")
    expect(result.stderr).toContain(`upstreams[1].args[1]: the script '${join(dir, 'server.py')}' does not exist`)
    expect(result.stderr).toContain("upstreams[2].args[1]: the script './missing/main.mjs' does not exist")
    expect(result.stderr).not.toMatch(/upstreams\[[3-6]\]/)
  })

  it('refuses a duration written as a bare number, and says what to write', async () => {
    const result = await check('server: { shutdownGrace: 15 }\nupstreams:\n  - { name: a, transport: stdio, command: node }\n')
    expect(result.code).toBe(2)
    expect(result.stderr).toContain('server.shutdownGrace: a duration needs a unit: write 15s or 15000ms')
  })

  it('says which GATEWAY_… variables it applied to which options, and fails on one that names no option', async () => {
    const upstream = 'upstreams:\n  - { name: a, transport: stdio, command: node }\n'
    const applied = await check(upstream, { GATEWAY_SERVER__PORT: '9000', GATEWAY_UPSTREAMS__A__ARGS: '[dist/demo/main.js]' })
    expect(applied.stderr).toBe('')
    expect(applied.code).toBe(0)
    expect(applied.stdout).toContain('GATEWAY_SERVER__PORT sets server.port')
    expect(applied.stdout).toContain('GATEWAY_UPSTREAMS__A__ARGS sets upstreams[0].args')
    expect(applied.stdout).not.toContain('9000')
    const unread = await check(upstream, { GATEWAY_SERVER_PORT: '9000', GATEWAY_SERVICE_HOST: '10.0.0.1' })
    expect(unread.code).toBe(0)
    expect(unread.stderr).toBe("note: GATEWAY_SERVER_PORT is not read: the parts of an option's path are separated by __ (GATEWAY_SERVER__PORT)\n")
    const typo = await check(upstream, { GATEWAY_SERVER__PORTT: '9000' })
    expect(typo.code).toBe(2)
    expect(typo.stderr).toContain("GATEWAY_SERVER__PORTT: 'PORTT' is no option of server")
  })
})
