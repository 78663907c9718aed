// config/gateway.schema.json is generated from the zod schema and committed; these tests regenerate it in memory
// so that it cannot go stale, and check that the JSON Schema and the loader agree on what a configuration is.
import { readFile } from 'node:fs/promises'
import { parseDocument } from 'yaml'
import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import { configJsonSchema, DURATION_PATTERN, renderConfigJsonSchema, SCHEMA_FILE, SIZE_PATTERN } from '../../scripts/generate-config-schema.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { configSchema } from '../../src/config/schema.ts'

const EXAMPLE = new URL('../../config/gateway.example.yaml', import.meta.url)
const CONFIG_DOCS = new URL('../../docs/configuration.md', import.meta.url)
const EXAMPLE_ENV: Record<string, string> = { API_TOKEN: 'test-token' }

type JsonSchema = Record<string, unknown>

/** Every property name declared anywhere in the schema (all sections, all transports). */
function propertyNames (schema: unknown, into = new Set<string>()): Set<string> {
  if (Array.isArray(schema)) {
    for (const item of schema) propertyNames(item, into)
  } else if (schema !== null && typeof schema === 'object') {
    const node = schema as JsonSchema
    if (node.properties !== null && typeof node.properties === 'object') {
      for (const name of Object.keys(node.properties)) into.add(name)
    }
    for (const [key, value] of Object.entries(node)) {
      if (key !== 'default') propertyNames(value, into)
    }
  }
  return into
}

/** The YAML tree of a file with ${VAR} and ${VAR:-default} replaced in strings, as the loader does. */
function interpolatedTree (text: string, env: Record<string, string>): unknown {
  const replace = (value: unknown): unknown => {
    if (typeof value === 'string') return value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g, (_m, name: string, fallback?: string) => env[name] || fallback || '')
    if (Array.isArray(value)) return value.map(replace)
    if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, replace(v)]))
    return value
  }
  return replace(parseDocument(text).toJS())
}

describe('config/gateway.schema.json', () => {
  it('is what npm run config:schema generates from src/config/schema.ts', async () => {
    const committed = await readFile(SCHEMA_FILE, 'utf8')
    expect(committed, 'config/gateway.schema.json is stale: run npm run config:schema').toBe(renderConfigJsonSchema())
  })

  it('describes the input side: durations as strings with a pattern (or 0), sizes as strings with a pattern or as numbers, with their defaults', () => {
    const schema = configJsonSchema() as { properties: Record<string, { properties: Record<string, JsonSchema> }> }
    const server = schema.properties.server!.properties
    expect(server.sessionIdleTimeout).toMatchObject({
      default: '1h',
      description: expect.stringContaining('delete a session unused for this long'),
      anyOf: [{ const: 0 }, { type: 'string', pattern: DURATION_PATTERN }],
    })
    expect(server.maxBodyBytes).toMatchObject({ default: '4mb', anyOf: [{ type: 'integer' }, { type: 'string', pattern: SIZE_PATTERN }] })
    expect(server.port).toMatchObject({ type: 'integer', default: 8080 })
    expect(schema).toMatchObject({ required: ['upstreams'], additionalProperties: false })
  })

  it('has unit patterns that accept what the loader accepts', () => {
    const duration = new RegExp(DURATION_PATTERN)
    const size = new RegExp(SIZE_PATTERN)
    for (const written of ['500ms', '30s', '10m', '1h', '2d', '1.5s', '2 H', '10MS']) expect(duration.test(written), written).toBe(true)
    for (const written of ['10 parsecs', '1h30m', '-5s', '1 week', 'ms', '']) expect(duration.test(written), written).toBe(false)
    for (const written of ['512kb', '4mb', '1gb', '2 MB', '100b']) expect(size.test(written), written).toBe(true)
    for (const written of ['4 megabytes', '1tb', 'mb', '-1mb']) expect(size.test(written), written).toBe(false)
  })
})

/** A `server.stateSecret`, required with the redis store. */
const SECRET = 'sixteen or more characters'

describe('the JSON Schema and the loader agree', () => {
  const fromJsonSchema = z.fromJSONSchema(configJsonSchema() as Parameters<typeof z.fromJSONSchema>[0])
  const upstream = { name: 'a', transport: 'stdio', command: 'node' }

  it('on the example configuration', async () => {
    const text = await readFile(EXAMPLE, 'utf8')
    expect(() => parseConfigText(text, EXAMPLE_ENV)).not.toThrow()
    const tree = interpolatedTree(text, EXAMPLE_ENV)
    const result = fromJsonSchema.safeParse(tree)
    expect(result.error?.issues ?? []).toEqual([])
    expect(configSchema.safeParse(tree).success).toBe(true)
  })

  it.each([
    ['a minimal configuration', { upstreams: [upstream] }, true],
    ['durations and sizes as strings and numbers', { server: { maxBodyBytes: 524_288, sseKeepAlive: '5s', shutdownGrace: 0 }, upstreams: [{ ...upstream, timeouts: { call: '2 h' } }] }, true],
    ['a duration as a bare number other than 0', { server: { shutdownGrace: 15 }, upstreams: [upstream] }, false],
    ['an unknown option', { upstreams: [{ ...upstream, timeout: '5s' }] }, false],
    ['an unknown section', { upstreams: [upstream], plugins: {} }, false],
    ['tasks, auth and task settings', {
      tasks: { defaultTtl: '10m', maxTtl: '2d', pollInterval: '500ms', maxActivePerPrincipal: 5, maxQueuedInputs: 2, sweepInterval: '1m' },
      auth: { tokens: [{ principal: 'alice', sha256: 'ab'.repeat(32) }] },
      upstreams: [{ ...upstream, taskSupport: 'required', toolSettings: { job: { taskSupport: 'forbidden', idempotent: true } } }],
    }, true],
    ['a token in place of its SHA-256', { auth: { tokens: [{ principal: 'alice', sha256: 'my-secret-token' }] }, upstreams: [upstream] }, false],
    ['a token without a principal', { auth: { tokens: [{ sha256: 'ab'.repeat(32) }] }, upstreams: [upstream] }, false],
    ['an unknown taskSupport', { upstreams: [{ ...upstream, taskSupport: 'always' }] }, false],
    ['an unknown task option', { tasks: { ttl: '1h' }, upstreams: [upstream] }, false],
    ['no active task allowed', { tasks: { maxActivePerPrincipal: 0 }, upstreams: [upstream] }, false],
    ['an unknown transport', { upstreams: [{ name: 'a', transport: 'http', url: 'http://x/' }] }, false],
    ['an option of another transport', { upstreams: [{ ...upstream, url: 'http://x/' }] }, false],
    ['a bad duration', { upstreams: [{ ...upstream, idleTimeout: '10 parsecs' }] }, false],
    ['a bad size', { server: { maxBodyBytes: '4 megabytes' }, upstreams: [upstream] }, false],
    ['a port out of range', { server: { port: 70_000 }, upstreams: [upstream] }, false],
    ['no upstream', { upstreams: [] }, false],
    ['a bad name', { upstreams: [{ ...upstream, name: 'my server' }] }, false],
    ['an empty prefix', { upstreams: [{ ...upstream, prefix: '' }] }, true],
    ['a memory store', { store: { kind: 'memory' }, upstreams: [upstream] }, true],
    ['a memory store with a path', { store: { kind: 'memory', path: 'x' }, upstreams: [upstream] }, false],
    ['a TLS redis store with a password and a private CA', { store: { kind: 'redis', url: 'rediss://redis.internal:6380', password: 'p', caFile: 'ca.pem' }, server: { stateSecret: SECRET }, upstreams: [upstream] }, true],
  ])('on %s', (_what, input, valid) => {
    expect(configSchema.safeParse(input).success).toBe(valid)
    expect(fromJsonSchema.safeParse(input).success).toBe(valid)
  })
})

describe('store.caFile', () => {
  it('needs a TLS url, and says so at its path', () => {
    const parsed = configSchema.safeParse({ store: { kind: 'redis', url: 'redis://redis.internal:6379', caFile: 'ca.pem' }, server: { stateSecret: SECRET }, upstreams: [{ name: 'a', transport: 'stdio', command: 'node' }] })
    expect(parsed.success).toBe(false)
    expect(parsed.error?.issues).toMatchObject([{ path: ['store', 'caFile'], message: 'caFile needs a rediss:// url (TLS)' }])
  })

  it('needs sslmode in a postgres url, and a postgres schema is a plain identifier', () => {
    const upstreams = [{ name: 'a', transport: 'stdio', command: 'node' }]
    const withCa = configSchema.safeParse({ store: { kind: 'postgres', url: 'postgres://db.internal/gw', caFile: 'ca.pem' }, server: { stateSecret: SECRET }, upstreams })
    expect(withCa.error?.issues).toMatchObject([{ path: ['store', 'caFile'], message: 'caFile needs TLS: add ?sslmode=verify-full to the url' }])
    const quoted = configSchema.safeParse({ store: { kind: 'postgres', schema: 'gw"; DROP' }, server: { stateSecret: SECRET }, upstreams })
    expect(quoted.error?.issues).toMatchObject([{ path: ['store', 'schema'] }])
    const tls = configSchema.safeParse({ store: { kind: 'postgres', url: 'postgres://db.internal/gw?sslmode=verify-full', caFile: 'ca.pem' }, server: { stateSecret: SECRET }, upstreams })
    expect(tls.success).toBe(true)
    const prefer = configSchema.safeParse({ store: { kind: 'postgres', url: 'postgres://db.internal/gw?sslmode=prefer' }, server: { stateSecret: SECRET }, upstreams })
    expect(prefer.error?.issues).toMatchObject([{ path: ['store', 'url'], message: 'sslmode must be disable, require or verify-full' }])
  })
})

describe('documentation of every option', () => {
  const names = [...propertyNames(configJsonSchema())]

  it('finds the options of every section and transport', () => {
    expect(names).toEqual(expect.arrayContaining(['server', 'sessionIdleTimeout', 'redactHeaders', 'kind', 'command', 'cwd', 'url', 'connections', 'toolSettings', 'timeout', 'initialDelay',
      'tasks', 'maxActivePerPrincipal', 'auth', 'tokens', 'principal', 'sha256', 'taskSupport', 'idempotent']))
  })

  it('config/gateway.example.yaml writes the tasks and auth sections with their defaults', async () => {
    const example = parseConfigText(await readFile(EXAMPLE, 'utf8'), EXAMPLE_ENV)
    const defaults = configSchema.parse({ upstreams: [{ name: 'a', transport: 'stdio', command: 'node' }] })
    expect(example.tasks).toEqual(defaults.tasks)
    expect(example.auth).toEqual(defaults.auth)
    expect(example.upstreams[0]).toMatchObject({ taskSupport: defaults.upstreams[0]!.taskSupport })
  })

  it('config/gateway.example.yaml sets or mentions every option', async () => {
    const text = await readFile(EXAMPLE, 'utf8')
    const missing = names.filter((name) => !new RegExp(`^[\\s#-]*(\\{\\s*)?${name}:`, 'm').test(text) && !text.includes(`{ ${name}:`))
    expect(missing).toEqual([])
  })

  it('docs/configuration.md lists every option', async () => {
    const text = await readFile(CONFIG_DOCS, 'utf8')
    const missing = names.filter((name) => !new RegExp(`\`[^\`\\s]*\\b${name}\\b[^\`\\s]*\``).test(text))
    expect(missing).toEqual([])
  })
})
