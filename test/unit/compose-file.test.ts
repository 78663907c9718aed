// compose.yaml (on Redis) and compose.postgres.yaml (on PostgreSQL) as examples worth copying: every file they
// mount or hand over as a secret exists, the configuration the gateway gets loads with the environment compose
// gives it, every variable they set is read by that configuration or the image, the store's server wants a
// password, and nothing they start serves without auth.
import { access, readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { parse } from 'yaml'
import { parseConfigText } from '../../src/config/load.ts'
import { authConfigured, openListenerProblems } from '../../src/config/open-listener.ts'
import type { Config } from '../../src/config/schema.ts'
import { parseDuration } from '../../src/config/units.ts'

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url))
/** Where the image's CMD reads its configuration. */
const IMAGE_CONFIG = '/etc/mcp-task-gateway/gateway.yaml'
/** What the gateway needs after its grace to cancel what is left, mark the tasks and close. */
const CLOSE_MARGIN_MS = 2000
const STATE_SECRET = 'a-state-secret-of-at-least-32-characters'

/** A compose file, the store it runs the gateway on, and what an operator exports before `docker compose up`. */
interface ComposeFile {
  file: string
  /** The store's compose service, and the variable with its password. */
  store: 'redis' | 'postgres'
  password: 'REDIS_PASSWORD' | 'POSTGRES_PASSWORD'
}

const FILES: ComposeFile[] = [
  { file: 'compose.yaml', store: 'redis', password: 'REDIS_PASSWORD' },
  { file: 'compose.postgres.yaml', store: 'postgres', password: 'POSTGRES_PASSWORD' },
]

/** The variables compose refuses to start without. */
const shellOf = (c: ComposeFile): Record<string, string> => ({ GATEWAY_STATE_SECRET: STATE_SECRET, [c.password]: `a-${c.store}-password-of-32-characters!` })

const read = async (file: string): Promise<string> => await readFile(`${REPO_ROOT}${file}`, 'utf8')
const exists = async (file: string): Promise<boolean> => await access(`${REPO_ROOT}${file}`).then(() => true, () => false)

/** Compose's `${VAR:-default}`, `${VAR:?message}` and `${VAR}` with the shell's environment `env`. */
function composeValue (value: string, env: Record<string, string>): string {
  return value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)(?::([-?])([^}]*))?\}/g, (_m, name: string, kind: string | undefined, text: string | undefined) => {
    if (env[name] !== undefined) return env[name]
    if (kind === '-') return text ?? ''
    throw new Error(`compose would refuse to start: ${name}: ${text ?? 'not set'}`)
  })
}

type SecretUse = string | { source: string, target?: string }

interface Service {
  image?: string
  build?: unknown
  command?: string[]
  environment?: Record<string, string>
  ports?: string[]
  volumes?: string[]
  secrets?: SecretUse[]
  depends_on?: Record<string, { condition?: string }>
  healthcheck?: { test: string[] }
  stop_grace_period?: string
}

interface Compose {
  services: Record<string, Service>
  secrets?: Record<string, { file?: string, environment?: string }>
  volumes?: Record<string, unknown>
}

const compose = async (c: ComposeFile): Promise<Compose> => parse(await read(c.file)) as Compose

/** Where compose mounts a secret: its target, absolute or under /run/secrets/, else /run/secrets/<source>. */
function secretTarget (use: SecretUse): { source: string, target: string } {
  const { source, target } = typeof use === 'string' ? { source: use, target: undefined } : use
  const path = target ?? source
  return { source, target: path.startsWith('/') ? path : `/run/secrets/${path}` }
}

/** The host files a service gets, by the path it sees them at: bind mounts and file secrets. */
function mountedFiles (service: Service, all: Compose): Map<string, string> {
  const files = new Map<string, string>()
  for (const volume of service.volumes ?? []) {
    const [source, target] = volume.split(':')
    if (source !== undefined && target !== undefined && /^\.{1,2}\//.test(source)) files.set(target, source.replace(/^\.\//, ''))
  }
  for (const use of service.secrets ?? []) {
    const { source, target } = secretTarget(use)
    const file = all.secrets?.[source]?.file
    if (file !== undefined) files.set(target, file.replace(/^\.\//, ''))
  }
  return files
}

/** The gateway's environment as compose sets it from the operator's shell. */
const environment = (service: Service, shell: Record<string, string>): Record<string, string> =>
  Object.fromEntries(Object.entries(service.environment ?? {}).map(([k, v]) => [k, composeValue(String(v), shell)]))

interface ComposeGateway { name: string, service: Service, file: string, config: Config, env: Record<string, string> }

/** The services that run this project's image, with the configuration each one reads, loaded as the gateway would. */
async function gateways (c: ComposeFile): Promise<ComposeGateway[]> {
  const all = await compose(c)
  const out = []
  for (const [name, service] of Object.entries(all.services)) {
    if (service.build === undefined && !(service.image ?? '').startsWith('mcp-task-gateway')) continue
    const file = mountedFiles(service, all).get(IMAGE_CONFIG)
    expect(file, `${name} gets its configuration at ${IMAGE_CONFIG}`).toBeDefined()
    const env = environment(service, shellOf(c))
    out.push({ name, service, file: file!, env, config: parseConfigText(await read(file!), env, file) })
  }
  expect(out.length).toBeGreaterThan(0)
  return out
}

/** The Redis of compose.yaml wants a password, keeps its data, and is reachable only on the compose network. */
async function redisServer (c: ComposeFile, shell: Record<string, string>): Promise<void> {
  const all = await compose(c)
  const { redis } = all.services
  expect(redis?.image).toMatch(/^redis:\d+\.\d+\.\d+-[a-z]+$/)
  expect(redis!.command!.map((part) => composeValue(part, shell))).toEqual(expect.arrayContaining(['--requirepass', shell.REDIS_PASSWORD, '--appendonly', 'yes']))
  expect(redis!.ports ?? []).toEqual([])
  expect(redis!.volumes?.some((v) => v.endsWith(':/data'))).toBe(true)
  // redis-cli, the health check, reads the password from REDISCLI_AUTH.
  expect(redis!.healthcheck?.test.join(' ')).toContain('redis-cli ping')
  expect(composeValue(redis!.environment?.REDISCLI_AUTH ?? '', shell)).toBe(shell.REDIS_PASSWORD)
  for (const { name, service, config } of await gateways(c)) {
    expect(service.depends_on?.redis?.condition).toBe('service_healthy')
    expect(config.store.kind).toBe('redis')
    const url = new URL(config.store.kind === 'redis' ? config.store.url : '')
    expect(url.host, `${name} reaches the compose service redis`).toBe('redis:6379')
    expect(decodeURIComponent(url.password) || (config.store.kind === 'redis' ? config.store.password : undefined)).toBe(shell.REDIS_PASSWORD)
  }
}

/**
 * The PostgreSQL of compose.postgres.yaml: a role of the gateway's own with a password, its data kept, reachable only
 * on the compose network.
 */
async function postgresServer (c: ComposeFile, shell: Record<string, string>): Promise<void> {
  const { postgres } = (await compose(c)).services
  expect(postgres?.image).toMatch(/^postgres:\d+\.\d+-[a-z]+$/)
  expect(postgres!.ports ?? []).toEqual([])
  expect(postgres!.volumes?.some((v) => v.endsWith(':/var/lib/postgresql/data'))).toBe(true)
  const env = environment(postgres!, shell)
  expect(env).toMatchObject({ POSTGRES_USER: 'gateway', POSTGRES_DB: 'gateway', POSTGRES_PASSWORD: shell.POSTGRES_PASSWORD })
  expect(env.POSTGRES_INITDB_ARGS).toContain('--auth-host=scram-sha-256')
  expect(postgres!.healthcheck?.test.join(' ')).toContain('pg_isready')
  for (const { name, service, config } of await gateways(c)) {
    expect(service.depends_on?.postgres?.condition).toBe('service_healthy')
    expect(config.store.kind).toBe('postgres')
    const url = new URL(config.store.kind === 'postgres' ? config.store.url : '')
    expect(url.host, `${name} reaches the compose service postgres`).toBe('postgres:5432')
    expect(url.pathname).toBe('/gateway')
    expect(url.username).toBe('gateway')
    expect(decodeURIComponent(url.password)).toBe(shell.POSTGRES_PASSWORD)
  }
}

describe.each(FILES)('$file', (c) => {
  const SHELL = shellOf(c)

  it('mounts only files that exist, and hands over only secrets it declares with a file that exists', async () => {
    const all = await compose(c)
    for (const [name, service] of Object.entries(all.services)) {
      for (const use of service.secrets ?? []) {
        const { source } = secretTarget(use)
        expect(all.secrets?.[source], `service ${name} uses secret ${source}, which compose.yaml declares`).toBeDefined()
        expect(all.secrets![source]!.file, `secret ${source} comes from a file`).toBeDefined()
      }
      for (const [target, file] of mountedFiles(service, all)) expect(await exists(file), `${file} (mounted at ${target} in ${name})`).toBe(true)
    }
  })

  it('gives the gateway a configuration that loads with the environment compose sets, and serves nobody without a token', async () => {
    for (const { name, service, config, env } of await gateways(c)) {
      expect(service.secrets?.length, `${name} takes its configuration, with its tokens, from a secret`).toBeGreaterThan(0)
      expect(authConfigured(config.auth), `${name} has auth.tokens or auth.oauth`).toBe(true)
      expect(config.auth.tokens.length).toBeGreaterThan(0)
      expect(config.server.allowUnauthenticated).toBe(false)
      expect(env.GATEWAY_ALLOW_UNAUTHENTICATED).toBeUndefined()
      expect(openListenerProblems(config)).toEqual([])
      expect(config.server.host).toBe('0.0.0.0')
      expect(config.server.port).toBe(Number(env.GATEWAY_PORT))
      // Every process on one store needs the same one: it comes from the operator's shell, never from the file.
      expect(config.server.stateSecret).toBe(SHELL.GATEWAY_STATE_SECRET)
      expect(service.ports?.map((p) => composeValue(p, SHELL))).toContain(`${env.GATEWAY_PORT}:${env.GATEWAY_PORT}`)
    }
  })

  it('refuses to start without the state secret and the store\'s password', async () => {
    const { gateway, [c.store]: store } = (await compose(c)).services
    for (const missing of Object.keys(SHELL)) {
      const shell: Record<string, string> = { ...SHELL }
      delete shell[missing]
      expect(() => environment(gateway!, shell), `without ${missing}`).toThrow(new RegExp(missing))
    }
    const settings = [...store!.command ?? [], ...Object.values(store!.environment ?? {})].join(' ')
    expect(() => composeValue(settings, {})).toThrow(new RegExp(c.password))
  })

  it('sets no variable that neither the configuration nor the image reads', async () => {
    const dockerfile = await read('Dockerfile')
    for (const { name, service, file } of await gateways(c)) {
      const text = await read(file)
      for (const variable of Object.keys(service.environment ?? {})) {
        const read = text.includes(`\${${variable}}`) || text.includes(`\${${variable}:-`) || new RegExp(`\\b${variable}\\b`).test(dockerfile)
        expect(read, `${name} sets ${variable}: ${file} or the Dockerfile reads it`).toBe(true)
      }
    }
  })

  it('runs the gateway on a store server that wants a password, keeps its data, and is reachable only on the compose network', async () => {
    await (c.store === 'redis' ? redisServer(c, SHELL) : postgresServer(c, SHELL))
  })

  it('stops the gateway after its grace has run out, not before', async () => {
    for (const { name, service, config } of await gateways(c)) {
      expect(service.stop_grace_period, `${name} sets stop_grace_period`).toBeDefined()
      expect(parseDuration(service.stop_grace_period!)).toBeGreaterThanOrEqual(config.server.shutdownGrace + CLOSE_MARGIN_MS)
    }
  })
})
