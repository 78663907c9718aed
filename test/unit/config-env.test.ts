// Configuration the way operators pass it: any option from a GATEWAY_… environment variable over the YAML
// file, secrets from files (`${file:…}` in the YAML, GATEWAY_…_FILE variables), and every mistake in them
// reported by the variable's name.
/* eslint-disable no-template-curly-in-string -- the strings below are YAML with ${…} placeholders, on purpose */
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { configJsonSchema } from '../../scripts/generate-config-schema.ts'
import { parseConfigText, readConfigText, type ConfigProblem } from '../../src/config/load.ts'
import { GatewayError } from '../../src/errors.ts'

/** The problems a configuration text produces with `env` (fails the test when it loads). */
function problemsOf (text: string, env: Record<string, string>): ConfigProblem[] {
  try {
    parseConfigText(text, env)
  } catch (err) {
    expect(err).toBeInstanceOf(GatewayError)
    expect((err as GatewayError).code).toBe('GW_ERR_CONFIG_INVALID')
    return (err as GatewayError).data as ConfigProblem[]
  }
  throw new Error('expected the configuration to be rejected')
}

const TWO_UPSTREAMS = [
  'upstreams:',
  '  - { name: demo, transport: stdio, command: node }',
  '  - { name: web-search, transport: streamable-http, url: "http://127.0.0.1:9000/mcp" }',
  '',
].join('\n')

let dir: string
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mcp-task-gateway-env-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

describe('GATEWAY_… environment variables', () => {
  it('set any option over the file: sections and options separated by __, in any case, words with or without _', () => {
    const config = parseConfigText(`server:\n  port: 8080\n${TWO_UPSTREAMS}`, {
      GATEWAY_SERVER__PORT: '9000',
      GATEWAY_SERVER__SHUTDOWN_GRACE: '15s',
      GATEWAY_TASKS__DECIDE__AFTER: '2s',
      GATEWAY_LOGGING__LEVEL: 'debug',
      gateway_limits__maxConnections: '50',
      GATEWAY_SERVER__DNSREBINDINGPROTECTION: 'false',
    })
    expect(config.server).toMatchObject({ port: 9000, shutdownGrace: 15_000, dnsRebindingProtection: false })
    expect(config.tasks.decide).toEqual({ after: 2000, input: 'task' })
    expect(config.logging.level).toBe('debug')
    expect(config.limits.maxConnections).toBe(50)
  })

  it('address an upstream by its index or by its name (upper case, - written as _), and keys of maps as written', () => {
    const config = parseConfigText(TWO_UPSTREAMS, {
      GATEWAY_UPSTREAMS__0__ARGS__0: 'dist/demo/main.js',
      GATEWAY_UPSTREAMS__DEMO__ENV__LOG_LEVEL: 'debug',
      GATEWAY_UPSTREAMS__WEB_SEARCH__URL: 'http://10.0.0.5:9000/mcp',
      GATEWAY_UPSTREAMS__WEB_SEARCH__HEADERS__Authorization: 'Bearer abc',
      GATEWAY_UPSTREAMS__1__TOOL_SETTINGS__search_deep__TIMEOUT: '2h',
    })
    expect(config.upstreams[0]).toMatchObject({ name: 'demo', args: ['dist/demo/main.js'], env: { LOG_LEVEL: 'debug' } })
    expect(config.upstreams[1]).toMatchObject({
      url: 'http://10.0.0.5:9000/mcp',
      headers: { Authorization: 'Bearer abc' },
      toolSettings: { search_deep: { timeout: 7_200_000 } },
    })
  })

  it('read values as YAML scalars: numbers and booleans, quotes keep a string, [ … ] and { … } are flow collections', () => {
    const config = parseConfigText(TWO_UPSTREAMS, {
      GATEWAY_SERVER__STATE_SECRET: '"0123456789012345678"',
      GATEWAY_SERVER__ALLOWED_HOSTS: '[gw.example.com, gw.internal]',
      GATEWAY_TASKS__DECIDE: '{ after: 1s, input: round }',
      GATEWAY_SERVER__TRUST_PROXY: '1',
    })
    expect(config.server).toMatchObject({ stateSecret: '0123456789012345678', allowedHosts: ['gw.example.com', 'gw.internal'], trustProxy: 1 })
    expect(config.tasks.decide).toEqual({ after: 1000, input: 'round' })
  })

  it('may add an upstream after the file\'s last one, by index', () => {
    const config = parseConfigText(TWO_UPSTREAMS, {
      GATEWAY_UPSTREAMS__2__NAME: 'extra',
      GATEWAY_UPSTREAMS__2__TRANSPORT: 'sse',
      GATEWAY_UPSTREAMS__2__URL: 'http://127.0.0.1:9100/sse',
    })
    expect(config.upstreams.map((u) => u.name)).toEqual(['demo', 'web-search', 'extra'])
  })

  it('that leave a gap in a list are refused, naming the entry left empty', () => {
    const problems = problemsOf(TWO_UPSTREAMS, { GATEWAY_UPSTREAMS__4__NAME: 'extra', GATEWAY_UPSTREAMS__4__TRANSPORT: 'sse', GATEWAY_UPSTREAMS__4__URL: 'http://127.0.0.1:9100/sse' })
    expect(problems).toContainEqual({ path: 'GATEWAY_UPSTREAMS__4__NAME', message: 'leaves upstreams[2] empty: an entry added by index follows the last one without a gap' })
  })

  it('with a name that is no option is an error naming the variable and the options there are', () => {
    const problems = problemsOf(TWO_UPSTREAMS, { GATEWAY_SERVER__PROT: '9000', GATEWAY_SERVR__PORT: '9000', GATEWAY_UPSTREAMS__NOPE__URL: 'http://x/mcp' })
    expect(problems).toEqual([
      { path: 'GATEWAY_SERVER__PROT', message: expect.stringMatching(/'PROT' is no option of server; its options: host, allowUnauthenticated, port, /) },
      { path: 'GATEWAY_SERVR__PORT', message: expect.stringMatching(/'SERVR' is no section of the configuration; its sections: server, logging, /) },
      { path: 'GATEWAY_UPSTREAMS__NOPE__URL', message: expect.stringContaining("no upstream is named 'NOPE' (upstreams: demo, web-search)") },
    ])
  })

  it('with a value the option does not take is reported at the option\'s path, the value hidden', () => {
    const problems = problemsOf(TWO_UPSTREAMS, { GATEWAY_SERVER__SESSION_IDLE_TIMEOUT: 'hunter2hunter2', GATEWAY_SERVER__PORT: 'eighty' })
    expect(problems.map((p) => p.path).sort()).toEqual(['server.port', 'server.sessionIdleTimeout'])
    expect(problems.find((p) => p.path === 'server.sessionIdleTimeout')?.message).toContain('the value of ${GATEWAY_SERVER__SESSION_IDLE_TIMEOUT} is not a duration')
    expect(JSON.stringify(problems)).not.toContain('hunter2')
  })

  it('leave alone variables without __ (GATEWAY_HOST for ${GATEWAY_HOST} in the file, a Kubernetes service\'s GATEWAY_PORT)', () => {
    const config = parseConfigText(`server:\n  host: \${GATEWAY_HOST:-127.0.0.1}\n  allowUnauthenticated: true\n${TWO_UPSTREAMS}`, {
      GATEWAY_HOST: '0.0.0.0',
      GATEWAY_PORT: 'tcp://10.0.0.1:8080',
      GATEWAY_SERVICE_HOST: '10.0.0.1',
    })
    expect(config.server).toMatchObject({ host: '0.0.0.0', port: 8080 })
  })

  it('that set one option twice, or an option and one inside it, are refused', () => {
    const problems = problemsOf(TWO_UPSTREAMS, { GATEWAY_SERVER__PORT: '1', GATEWAY_server__port: '2', GATEWAY_TASKS__DECIDE: 'always', GATEWAY_TASKS__DECIDE__AFTER: '2s' })
    expect(problems).toEqual([
      { path: 'GATEWAY_TASKS__DECIDE__AFTER', message: expect.stringContaining('GATEWAY_TASKS__DECIDE already sets tasks.decide') },
      { path: 'GATEWAY_server__port', message: expect.stringContaining('GATEWAY_SERVER__PORT already sets server.port') },
    ])
  })

  it('make a ${VAR} at the option they set unneeded', () => {
    const config = parseConfigText(`server:\n  stateSecret: \${STATE_SECRET}\n${TWO_UPSTREAMS}`, { GATEWAY_SERVER__STATE_SECRET: 'sixteen-characters-or-more' })
    expect(config.server.stateSecret).toBe('sixteen-characters-or-more')
  })

  it('are listed with the options they set (never their values)', () => {
    const { overrides } = readConfigText(TWO_UPSTREAMS, { GATEWAY_SERVER__PORT: '9000', GATEWAY_UPSTREAMS__WEB_SEARCH__URL: 'http://10.0.0.5:9000/mcp' })
    expect(overrides).toEqual([
      { variable: 'GATEWAY_SERVER__PORT', path: 'server.port' },
      { variable: 'GATEWAY_UPSTREAMS__WEB_SEARCH__URL', path: 'upstreams[1].url' },
    ])
  })
})

describe('the naming rule', () => {
  /** Every set of options that sit side by side in the file (the branches of a union together), by path. */
  function levels (node: unknown, path = '(root)', out = new Map<string, Set<string>>()): Map<string, Set<string>> {
    if (node === null || typeof node !== 'object') return out
    const schema = node as Record<string, unknown>
    for (const branch of [...(schema.anyOf as unknown[] ?? []), ...(schema.oneOf as unknown[] ?? [])]) levels(branch, path, out)
    if (schema.items !== undefined) levels(schema.items, `${path}[]`, out)
    if (typeof schema.additionalProperties === 'object') levels(schema.additionalProperties, `${path}.<key>`, out)
    for (const [name, child] of Object.entries((schema.properties ?? {}) as Record<string, unknown>)) {
      out.set(path, (out.get(path) ?? new Set()).add(name))
      levels(child, `${path}.${name}`, out)
    }
    return out
  }

  it('is unambiguous: no two options side by side are the same in upper case without _', () => {
    for (const [path, names] of levels(configJsonSchema())) {
      const folded = [...names].map((name) => name.toLowerCase().replaceAll('_', ''))
      expect(new Set(folded).size, `${path}: ${[...names].join(', ')}`).toBe(names.size)
    }
  })
})

describe('secrets from files', () => {
  it('${file:…} in the file takes the file\'s content, less a trailing newline', async () => {
    const secret = join(dir, 'state-secret')
    const token = join(dir, 'token')
    await writeFile(secret, 'sixteen-characters-or-more\n')
    await writeFile(token, 'abc\r\n')
    const config = parseConfigText([
      'server:',
      `  stateSecret: \${file:${secret}}`,
      'upstreams:',
      '  - name: web',
      '    transport: streamable-http',
      '    url: http://127.0.0.1:9000/mcp',
      '    headers:',
      `      Authorization: Bearer \${file:${token}}`,
      '',
    ].join('\n'), {})
    expect(config.server.stateSecret).toBe('sixteen-characters-or-more')
    expect((config.upstreams[0] as { headers: Record<string, string> }).headers.Authorization).toBe('Bearer abc')
  })

  it('a ${file:…} that cannot be read is a problem at its path, naming the file', () => {
    const missing = join(dir, 'missing')
    const problems = problemsOf(`server:\n  stateSecret: \${file:${missing}}\n${TWO_UPSTREAMS}`, {})
    expect(problems).toEqual([{ path: 'server.stateSecret', message: `cannot read the secret file '${missing}': ENOENT` }])
  })

  it('GATEWAY_…_FILE reads an option from a file, always as a string; an option whose name ends in File stays itself', async () => {
    const secret = join(dir, 'redis-url')
    await writeFile(secret, 'rediss://:pw@redis:6379\n')
    const config = parseConfigText(TWO_UPSTREAMS, {
      GATEWAY_STORE__KIND: 'redis',
      GATEWAY_STORE__URL_FILE: secret,
      GATEWAY_STORE__CA_FILE: '/etc/ssl/redis-ca.pem',
      GATEWAY_SERVER__STATE_SECRET_FILE: secret,
    })
    expect(config.store).toMatchObject({ kind: 'redis', url: 'rediss://:pw@redis:6379', caFile: '/etc/ssl/redis-ca.pem' })
    expect(config.server.stateSecret).toBe('rediss://:pw@redis:6379')
  })

  it('a GATEWAY_…_FILE that cannot be read is a problem named by the variable', () => {
    const missing = join(dir, 'nothing-here')
    expect(problemsOf(TWO_UPSTREAMS, { GATEWAY_SERVER__STATE_SECRET_FILE: missing })).toEqual([
      { path: 'GATEWAY_SERVER__STATE_SECRET_FILE', message: `cannot read the secret file '${missing}': ENOENT` },
    ])
  })
})
