// upstreams[].credentials as written: every problem is reported with its YAML path, a key file that cannot serve
// refuses the configuration (at start and at reload), and what is allowed but risky is warned about.
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { configWarnings } from '../../src/config/config-warnings.ts'
import { parseConfig, type ConfigProblem } from '../../src/config/load.ts'
import { GatewayError } from '../../src/errors.ts'

type Json = Record<string, unknown>

const AUTH = { tokens: [{ principal: 'alice', sha256: 'a'.repeat(64), scopes: [] }] }

function upstream (extra: Json): Json {
  return { name: 'crm', transport: 'streamable-http', url: 'http://127.0.0.1:9/mcp', ...extra }
}

function problemsOf (raw: Json, env: Record<string, string> = {}): ConfigProblem[] {
  try {
    parseConfig(raw, env)
  } catch (err) {
    expect(err).toBeInstanceOf(GatewayError)
    return (err as GatewayError).data as ConfigProblem[]
  }
  throw new Error('the configuration was accepted')
}

describe('upstreams[].credentials', () => {
  let dir: string
  let keys: string

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gw-credentials-config-'))
    keys = join(dir, 'keys.yaml')
    await writeFile(keys, 'alice: alice-key\nbob: "0123"\n')
    await chmod(keys, 0o600)
  })
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  it('takes per-principal keys from a file and the environment, with defaults', () => {
    const config = parseConfig({ auth: AUTH, upstreams: [upstream({ credentials: { kind: 'per-principal', file: keys, env: { carol: 'CAROL_KEY' } } })] }, { CAROL_KEY: 'carol-key' })
    const credentials = (config.upstreams[0] as Json).credentials as Json
    expect(credentials).toEqual({ kind: 'per-principal', header: 'authorization', file: keys, env: { carol: 'CAROL_KEY' } })
    expect(configWarnings(config, { CAROL_KEY: 'carol-key' })).toEqual([])
  })

  it('refuses credentials with forwardAuthorization, and per-principal keys without auth, at their paths', () => {
    const problems = problemsOf({ upstreams: [upstream({ forwardAuthorization: true, credentials: { kind: 'per-principal', file: keys } })] })
    expect(problems).toEqual(expect.arrayContaining([
      { path: 'upstreams[0].forwardAuthorization', message: expect.stringMatching(/cannot be combined with credentials/) },
      { path: 'upstreams[0].credentials', message: expect.stringMatching(/need callers who are principals: configure auth.tokens or auth.oauth/) },
    ]))
  })

  it('reports each malformed option at its path', () => {
    const problems = problemsOf({
      auth: AUTH,
      upstreams: [
        upstream({ name: 'a', credentials: { kind: 'per-principal' } }),
        upstream({ name: 'b', credentials: { kind: 'per-principal', file: keys, header: 'x api key', scheme: 'Two words' } }),
        upstream({ name: 'c', credentials: { kind: 'per-principal', env: { alice: 'not-a-variable' } } }),
        upstream({ name: 'd', credentials: { kind: 'api-key', file: keys } }),
        upstream({ name: 'e', credentials: { kind: 'per-principal', file: keys, keys: { alice: 'inline' } } }),
        { name: 'f', transport: 'stdio', command: 'node', credentials: { kind: 'per-principal', file: keys } },
      ],
    })
    const paths = problems.map((p) => p.path)
    expect(problems).toContainEqual({ path: 'upstreams[0].credentials.kind', message: 'give the keys in file, in env, or both' })
    expect(paths).toContain('upstreams[1].credentials.header')
    expect(paths).toContain('upstreams[1].credentials.scheme')
    expect(problems).toContainEqual({ path: 'upstreams[2].credentials.env.alice', message: 'must be the name of an environment variable' })
    expect(paths).toContain('upstreams[3].credentials.kind')
    expect(problems.find((p) => p.path === 'upstreams[4].credentials')?.message).toMatch(/unknown option\(s\) 'keys'/)
    expect(problems.find((p) => p.path === 'upstreams[5]')?.message).toMatch(/unknown option\(s\) 'credentials'/)
  })

  it('refuses keys that cannot be read, naming the option and never a key', async () => {
    const notMap = join(dir, 'list.yaml')
    await writeFile(notMap, '- alice-key\n')
    const numeric = join(dir, 'numeric.yaml')
    await writeFile(numeric, 'alice: 123456\n')
    const problems = problemsOf({
      auth: AUTH,
      upstreams: [
        upstream({ name: 'a', credentials: { kind: 'per-principal', file: join(dir, 'missing.yaml') } }),
        upstream({ name: 'b', credentials: { kind: 'per-principal', file: notMap } }),
        upstream({ name: 'c', credentials: { kind: 'per-principal', file: numeric } }),
        upstream({ name: 'd', credentials: { kind: 'per-principal', env: { alice: 'UNSET_KEY' } } }),
      ],
    })
    expect(problems).toEqual([
      { path: 'upstreams[0].credentials.file', message: expect.stringMatching(/cannot read the key file '.*missing.yaml': ENOENT/) },
      { path: 'upstreams[1].credentials.file', message: expect.stringMatching(/must map each principal to its key/) },
      { path: 'upstreams[2].credentials.file', message: expect.stringMatching(/gives principal 'alice' no key as a non-empty string/) },
      { path: 'upstreams[3].credentials.env.alice', message: 'the environment variable UNSET_KEY is not set (or empty)' },
    ])
    expect(JSON.stringify(problems)).not.toContain('123456')
  })

  it('warns of a key file others may read, and of forwardAuthorization, naming the upstream', async () => {
    const open = join(dir, 'open.yaml')
    await writeFile(open, 'alice: alice-key\n')
    await chmod(open, 0o644)
    const config = parseConfig({
      auth: AUTH,
      upstreams: [upstream({ credentials: { kind: 'per-principal', file: open } }), upstream({ name: 'mail', forwardAuthorization: true })],
    })
    expect(configWarnings(config)).toEqual([
      { path: 'upstreams[0].credentials.file', message: expect.stringMatching(/may be read by other users than the gateway's .*chmod 600/) },
      { path: 'upstreams[1].forwardAuthorization', message: expect.stringMatching(/^upstream 'mail' is sent each caller's own Authorization header \(forwardAuthorization\): a token issued for the gateway reaches another server/) },
    ])
  })
})
