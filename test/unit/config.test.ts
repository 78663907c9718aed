// Loading the YAML configuration: the shipped files, ${ENV} interpolation, units, every problem reported at
// once with its YAML path, frozen results (the command line's handling of them: command-line.test.ts).
/* eslint-disable no-template-curly-in-string -- the strings below are YAML with ${VAR} placeholders, on purpose */
import { readFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { loadConfig, parseConfigText, type ConfigProblem } from '../../src/config/load.ts'
import { GatewayError } from '../../src/errors.ts'

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url))
const EXAMPLE_FILE = join(REPO_ROOT, 'config/gateway.example.yaml')
const DEFAULT_FILE = join(REPO_ROOT, 'config/gateway.yaml')
/** The only variable the example requires; the others have defaults. */
const EXAMPLE_ENV = { API_TOKEN: 'test-token' }

/** The problems a configuration text produces (fails the test when it loads). */
function problemsOf (text: string, env: Record<string, string> = {}): { message: string, problems: ConfigProblem[] } {
  try {
    parseConfigText(text, env)
  } catch (err) {
    expect(err).toBeInstanceOf(GatewayError)
    const error = err as GatewayError
    expect(error.code).toBe('GW_ERR_CONFIG_INVALID')
    return { message: error.message, problems: error.data as ConfigProblem[] }
  }
  throw new Error('expected the configuration to be rejected')
}

/** A configuration with one stdio upstream whose options are given as YAML flow-map entries. */
function withUpstream (extra = ''): string {
  return `upstreams:\n  - { name: a, transport: stdio, command: node${extra === '' ? '' : `, ${extra}`} }\n`
}

describe('the shipped configuration files', () => {
  it('the example loads with the variables it documents and spells out the defaults', async () => {
    const text = await readFile(EXAMPLE_FILE, 'utf8')
    const example = parseConfigText(text, EXAMPLE_ENV)
    const minimal = parseConfigText(withUpstream(), {})

    expect(example.server).toEqual(minimal.server)
    expect(example.logging).toEqual(minimal.logging)
    expect(example.store).toEqual(minimal.store)
    expect(minimal.server).toMatchObject({ host: '127.0.0.1', port: 8080, path: '/mcp', maxBodyBytes: 4 * 1024 * 1024, pageSize: 100, sessionIdleTimeout: 3_600_000 })
    expect(minimal.store).toEqual({ kind: 'sqlite', path: './data/gateway.db', lockStaleAfter: 30_000, busyWait: 5000 })

    // The first upstream writes every option with its default value.
    const [demo, search, files] = example.upstreams
    const { name: _n, command: _c, args, ...demoOptions } = demo as Extract<typeof demo, { transport: 'stdio' }>
    const { name: _m, command: _d, args: _a, ...defaults } = minimal.upstreams[0] as Extract<typeof demo, { transport: 'stdio' }>
    expect(args).toEqual(['dist/demo/main.js'])
    expect(demoOptions).toEqual(defaults)
    expect(defaults.timeouts.call).toBe(3_600_000)

    expect(search).toMatchObject({
      transport: 'streamable-http',
      url: 'http://127.0.0.1:9000/mcp',
      headers: { Authorization: 'Bearer test-token' },
      prefix: 'web',
      era: 'auto',
      tools: { allow: ['search_*', 'fetch_page'], deny: ['*_admin'] },
      toolSettings: { search_deep: { timeout: 7_200_000 }, fetch_page: { timeout: 90_000 } },
      sessions: 'shared',
      idleTimeout: 120_000,
      timeouts: { connect: 5000, request: 60_000, call: 1_800_000 },
    })
    expect(files).toMatchObject({ transport: 'sse', prefix: '', tools: { allow: ['*'], deny: ['delete_file', 'write_*'] } })
  })

  it('the example takes its optional settings from the environment', async () => {
    const text = await readFile(EXAMPLE_FILE, 'utf8')
    const config = parseConfigText(text, {
      ...EXAMPLE_ENV,
      GATEWAY_HOST: '::1',
      GATEWAY_DATA_DIR: '/var/lib/gateway',
      LOG_LEVEL: 'debug',
      SEARCH_URL: 'https://search.example.com/mcp',
    })
    expect(config.server.host).toBe('::1')
    expect(config.store).toEqual({ kind: 'sqlite', path: '/var/lib/gateway/gateway.db', lockStaleAfter: 30_000, busyWait: 5000 })
    expect(config.logging.level).toBe('debug')
    expect(config.upstreams[1]).toMatchObject({ url: 'https://search.example.com/mcp' })
    // It has no auth: every interface needs server.allowUnauthenticated, which it leaves at false.
    expect(() => parseConfigText(text, { ...EXAMPLE_ENV, GATEWAY_HOST: '0.0.0.0' })).toThrow(/server\.host: .*server\.allowUnauthenticated: true/)
  })

  it('the example names API_TOKEN and where it is used when the variable is missing', async () => {
    const { problems } = problemsOf(await readFile(EXAMPLE_FILE, 'utf8'), {})
    expect(problems).toEqual([{ path: 'upstreams[1].headers.Authorization', message: expect.stringContaining('API_TOKEN') }])
  })

  it('the default configuration loads without any variable', async () => {
    const config = await loadConfig(DEFAULT_FILE, {})
    expect(config.server.host).toBe('127.0.0.1')
    expect(config.store).toEqual({ kind: 'sqlite', path: './data/gateway.db', lockStaleAfter: 30_000, busyWait: 5000 })
    expect(config.upstreams.map((u) => u.name)).toEqual(['demo'])
  })
})

describe('environment variables', () => {
  it('replaces ${VAR} and ${VAR:-default} inside strings', () => {
    const text = 'server:\n  host: ${HOST:-127.0.0.1}\n  path: /${PREFIX}/mcp\nupstreams:\n  - { name: a, transport: stdio, command: "${CMD:-node}", args: ["${ARG:-x}"] }\n'
    const config = parseConfigText(text, { PREFIX: 'gw', ARG: 'server.js' })
    expect(config.server.host).toBe('127.0.0.1')
    expect(config.server.path).toBe('/gw/mcp')
    expect(config.upstreams[0]).toMatchObject({ command: 'node', args: ['server.js'] })
  })

  it('uses the default when the variable is empty, and the value when it is set', () => {
    const text = 'server:\n  host: ${HOST:-127.0.0.1}\n  allowUnauthenticated: true\n' + withUpstream()
    expect(parseConfigText(text, { HOST: '' }).server.host).toBe('127.0.0.1')
    expect(parseConfigText(text, { HOST: '0.0.0.0' }).server.host).toBe('0.0.0.0')
  })

  it('reports a missing variable without default by name and path', () => {
    const { problems } = problemsOf(withUpstream('env: { TOKEN: "${UPSTREAM_TOKEN}" }'))
    expect(problems).toEqual([{ path: 'upstreams[0].env.TOKEN', message: expect.stringContaining('UPSTREAM_TOKEN is not set') }])
  })

  it('works for durations and sizes, which are strings', () => {
    const text = 'server:\n  maxBodyBytes: ${BODY:-1mb}\n  sessionIdleTimeout: ${IDLE:-10m}\n' + withUpstream()
    const config = parseConfigText(text, { IDLE: '2h' })
    expect(config.server.maxBodyBytes).toBe(1024 * 1024)
    expect(config.server.sessionIdleTimeout).toBe(7_200_000)
  })
})

describe('durations and sizes', () => {
  it.each([
    ['500ms', 500],
    ['30s', 30_000],
    ['10m', 600_000],
    ['1h', 3_600_000],
    ['2d', 172_800_000],
    ['1.5s', 1500],
    ['"2 H"', 7_200_000],
    ['0', 0],
  ])('duration %s is %i ms', (written, ms) => {
    expect(parseConfigText(withUpstream(`timeouts: { call: ${written} }`), {}).upstreams[0]!.timeouts.call).toBe(ms)
  })

  it.each(['10 parsecs', '"-5s"', '"1 week"', '"1h30m"'])('rejects duration %s and says what to write', (written) => {
    const { problems } = problemsOf(withUpstream(`timeouts: { call: ${written} }`))
    expect(problems).toEqual([{ path: 'upstreams[0].timeouts.call', message: expect.stringContaining('write e.g. 500ms, 30s, 10m, 1h or 2d') }])
  })

  it('rejects a bare number other than 0 (it used to mean milliseconds), saying how to write it with a unit', () => {
    expect(problemsOf(withUpstream('idleTimeout: 15')).problems).toEqual([{ path: 'upstreams[0].idleTimeout', message: 'a duration needs a unit: write 15s or 15000ms (a bare 15 meant 15 milliseconds; write 15ms to keep that)' }])
    expect(problemsOf('server:\n  shutdownGrace: ${GRACE}\n' + withUpstream(), { GRACE: '30' }).problems).toEqual([{ path: 'server.shutdownGrace', message: expect.stringContaining('a duration needs a unit') }])
  })

  it('rejects negative numbers and durations too long for a timer', () => {
    expect(problemsOf(withUpstream('idleTimeout: -1')).problems[0]!.path).toBe('upstreams[0].idleTimeout')
    expect(problemsOf(withUpstream('idleTimeout: 30d')).problems).toEqual([{ path: 'upstreams[0].idleTimeout', message: expect.stringContaining('maximum of 24d') }])
  })

  it.each([
    ['512kb', 512 * 1024],
    ['4mb', 4 * 1024 * 1024],
    ['1gb', 1024 ** 3],
    ['"2 MB"', 2 * 1024 * 1024],
    ['100b', 100],
    ['65536', 65_536],
  ])('size %s is %i bytes', (written, bytes) => {
    expect(parseConfigText(`server: { maxBodyBytes: ${written} }\n${withUpstream()}`, {}).server.maxBodyBytes).toBe(bytes)
  })

  it.each(['4 megabytes', '0', '0kb', '"-1mb"'])('rejects size %s and says what to write', (written) => {
    const { problems } = problemsOf(`server: { maxBodyBytes: ${written} }\n${withUpstream()}`)
    expect(problems).toHaveLength(1)
    expect(problems[0]!.path).toBe('server.maxBodyBytes')
    expect(problems[0]!.message).toMatch(/size|too small|expected/i)
  })
})

describe('problems', () => {
  it('reports every problem at once, each with its YAML path', () => {
    const text = [
      'server:',
      '  port: 70000',
      'upstreams:',
      '  - { name: a, transport: stdio, command: node, maxConcurrentCalls: 0 }',
      '  - { name: b, transport: streamable-http, url: not-a-url }',
      '  - { name: c, transport: sse, url: "http://127.0.0.1:1/sse", timeouts: { call: 10 parsecs } }',
    ].join('\n')
    const { message, problems } = problemsOf(text)
    expect(problems.map((p) => p.path).sort()).toEqual([
      'server.port',
      'upstreams[0].maxConcurrentCalls',
      'upstreams[1].url',
      'upstreams[2].timeouts.call',
    ])
    for (const path of ['server.port', 'upstreams[0].maxConcurrentCalls', 'upstreams[1].url', 'upstreams[2].timeouts.call']) {
      expect(message).toContain(`- ${path}: `)
    }
  })

  it('reports a missing variable together with schema problems', () => {
    const text = 'upstreams:\n  - { name: a, transport: streamable-http, url: "${URL}", connections: 0 }\n'
    const { problems } = problemsOf(text)
    expect(problems.map((p) => p.path)).toEqual(expect.arrayContaining(['upstreams[0].url', 'upstreams[0].connections']))
    expect(problems.some((p) => p.message.includes('URL is not set'))).toBe(true)
  })

  it('reports unknown options where they are, pointing at the example', () => {
    const text = 'colour: blue\nserver: { prot: 8080 }\nupstreams:\n  - { name: a, transport: stdio, command: node, timeout: 5s }\n'
    const { problems } = problemsOf(text)
    expect(problems).toEqual(expect.arrayContaining([
      { path: '(root)', message: expect.stringContaining("unknown option(s) 'colour'") },
      { path: 'server', message: expect.stringContaining("'prot'") },
      { path: 'upstreams[0]', message: expect.stringContaining("'timeout'") },
    ]))
    expect(problems[0]!.message).toContain('gateway.example.yaml')
  })

  it('refuses permissions nobody could hold and rules that grant nothing, and forwardAuthorization outside streamable-http', () => {
    const text = 'auth:\n  permissions:\n    - { scope: admin, upstreams: ["*"] }\n    - { scope: empty }\n' +
      'upstreams:\n  - { name: a, transport: sse, url: "http://127.0.0.1/sse", forwardAuthorization: true }\n'
    const { problems } = problemsOf(text)
    expect(problems).toEqual(expect.arrayContaining([
      { path: 'auth.permissions', message: expect.stringContaining('configure auth.tokens or auth.oauth') },
      { path: 'auth.permissions[1]', message: expect.stringContaining('grant at least one upstream or tool') },
      { path: 'upstreams[0]', message: expect.stringContaining("'forwardAuthorization'") },
    ]))
  })

  it('refuses static principal names that OAuth subjects or callers without auth are given, and algorithms without a public key', () => {
    const hash = 'a'.repeat(64)
    const text = `auth:\n  tokens:\n    - { principal: "oauth:alice", sha256: ${hash} }\n    - { principal: anonymous, sha256: ${hash} }\n` +
      '  oauth: { issuer: "https://i.test/", jwksUri: "https://i.test/jwks", resource: "https://g.test/mcp", algorithms: [HS256] }\n' + withUpstream()
    const { problems } = problemsOf(text)
    expect(problems).toEqual(expect.arrayContaining([
      { path: 'auth.tokens[0].principal', message: expect.stringContaining('oauth:') },
      { path: 'auth.tokens[1].principal', message: expect.stringContaining('choose another name') },
      { path: 'auth.oauth.algorithms[0]', message: expect.stringContaining('RS256') },
    ]))
  })

  it('reports options of another transport as unknown', () => {
    const { problems } = problemsOf(withUpstream('url: "http://127.0.0.1/mcp"'))
    expect(problems).toEqual([{ path: 'upstreams[0]', message: expect.stringContaining("'url'") }])
  })

  it('names the accepted transports and store kinds', () => {
    expect(problemsOf('upstreams:\n  - { name: a, transport: http, url: "http://x/" }\n').problems).toEqual([
      { path: 'upstreams[0].transport', message: expect.stringMatching(/stdio.*streamable-http.*sse/) },
    ])
    expect(problemsOf(`store: { kind: mysql }\n${withUpstream()}`).problems).toEqual([
      { path: 'store.kind', message: expect.stringMatching(/memory.*sqlite.*redis.*postgres/) },
    ])
  })

  it('requires at least one upstream', () => {
    expect(problemsOf('upstreams: []\n').problems).toEqual([{ path: 'upstreams', message: 'list at least one upstream' }])
    expect(problemsOf('server: { port: 1 }\n').problems.map((p) => p.path)).toEqual(['upstreams'])
    expect(problemsOf('').problems.map((p) => p.path)).toEqual(['upstreams'])
  })

  it('rejects duplicate upstream names, naming both places', () => {
    const text = 'upstreams:\n  - { name: a, transport: stdio, command: node }\n  - { name: b, transport: stdio, command: node }\n  - { name: a, transport: sse, url: "http://127.0.0.1/sse" }\n'
    expect(problemsOf(text).problems).toEqual([{ path: 'upstreams[2].name', message: "duplicate upstream name 'a' (also upstreams[0])" }])
  })

  it('reports duplicate upstream names together with other problems', () => {
    const text = 'upstreams:\n  - { name: a, transport: stdio, command: node, maxConcurrentCalls: 0 }\n  - { name: b, transport: streamable-http, url: nope }\n  - { name: a, transport: stdio, command: node }\n'
    expect(problemsOf(text).problems.map((p) => p.path).sort()).toEqual(['upstreams[0].maxConcurrentCalls', 'upstreams[1].url', 'upstreams[2].name'])
  })

  it('reports duplicate upstream names together with a bad duration', () => {
    const text = 'upstreams:\n  - { name: a, transport: stdio, command: node, idleTimeout: 10 parsecs }\n  - { name: a, transport: stdio, command: node }\n'
    expect(problemsOf(text).problems.map((p) => p.path).sort()).toEqual(['upstreams[0].idleTimeout', 'upstreams[1].name'])
  })

  it('rejects names and prefixes that cannot be joined into tool names', () => {
    const { problems } = problemsOf('upstreams:\n  - { name: "my server", transport: stdio, command: node, prefix: "a.b" }\n')
    expect(problems.map((p) => p.path).sort()).toEqual(['upstreams[0].name', 'upstreams[0].prefix'])
  })

  it('reports YAML syntax errors with line and column', () => {
    const text = 'upstreams:\n  - name: a\n    transport: stdio\n   command: node\n'
    const { problems } = problemsOf(text)
    expect(problems.length).toBeGreaterThan(0)
    expect(problems[0]!.path).toMatch(/^line 4, column \d+$/)
  })

  it('reports YAML syntax errors in flow collections with line and column', () => {
    const { problems } = problemsOf('server: { port: 8080\nupstreams: []\n')
    expect(problems[0]!.path).toMatch(/^line \d+, column \d+$/)
  })

  it('names the file that cannot be read', async () => {
    const missing = join(tmpdir(), 'mcp-task-gateway-no-such-dir', 'gateway.yaml')
    await expect(loadConfig(missing, {})).rejects.toMatchObject({ code: 'GW_ERR_CONFIG_READ', message: expect.stringContaining(missing) })
  })
})

describe('the loaded configuration', () => {
  it('is deeply frozen', () => {
    const config = parseConfigText(withUpstream('tools: { allow: [a] }, toolSettings: { a: { timeout: 1s } }'), {})
    const upstream = config.upstreams[0]!
    const values = [
      config, config.server, config.server.allowedHosts, config.logging, config.store, config.upstreams,
      upstream, upstream.tools, upstream.tools.allow, upstream.toolSettings, upstream.toolSettings.a, upstream.timeouts,
    ]
    for (const value of values) {
      expect(Object.isFrozen(value)).toBe(true)
    }
    expect(() => { (config.server as { port: number }).port = 1 }).toThrow(TypeError)
    expect(() => { (upstream.tools.allow as string[]).push('b') }).toThrow(TypeError)
  })

  it('gives each load its own objects', () => {
    const a = parseConfigText(withUpstream(), {})
    const b = parseConfigText(withUpstream(), {})
    expect(a).toEqual(b)
    expect(a.server).not.toBe(b.server)
  })
})

describe('typed interpolation', () => {
  it('turns a value that is exactly one variable into a number or boolean', () => {
    const config = parseConfigText('server:\n  port: ${PORT:-8080}\n  dnsRebindingProtection: ${DNS:-true}\nupstreams:\n  - { name: a, transport: stdio, command: node }\n', { PORT: '9090' })
    expect(config.server.port).toBe(9090)
    expect(config.server.dnsRebindingProtection).toBe(true)
  })
})

describe('connect timeouts', () => {
  it('default to 60s for stdio, where a package runner may first download the server, and 10s for HTTP', () => {
    const text = 'upstreams:\n  - { name: a, transport: stdio, command: npx, args: [-y, some-server] }\n  - { name: b, transport: streamable-http, url: "http://127.0.0.1:1/mcp" }\n  - { name: c, transport: stdio, command: node, timeouts: { connect: 5s } }\n'
    expect(parseConfigText(text, {}).upstreams.map((u) => u.timeouts.connect)).toEqual([60_000, 10_000, 5000])
  })
})
