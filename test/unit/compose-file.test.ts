// compose.yaml as an example worth copying: every file it mounts or hands over as a secret exists, the
// configuration the gateway gets loads with the environment compose gives it, every variable it sets is read
// by that configuration or the image, Redis wants a password, and nothing it starts serves without auth.
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
/** What an operator exports before `docker compose up` (the variables compose refuses to start without). */
const SHELL = { GATEWAY_STATE_SECRET: 'a-state-secret-of-at-least-32-characters', REDIS_PASSWORD: 'a-redis-password-of-32-characters!' }

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

const compose = async (): Promise<Compose> => parse(await read('compose.yaml')) as Compose

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
const environment = (service: Service, shell: Record<string, string> = SHELL): Record<string, string> =>
  Object.fromEntries(Object.entries(service.environment ?? {}).map(([k, v]) => [k, composeValue(String(v), shell)]))

/** The services that run this project's image, with the configuration each one reads, loaded as the gateway would. */
async function gateways (): Promise<Array<{ name: string, service: Service, file: string, config: Config, env: Record<string, string> }>> {
  const all = await compose()
  const out = []
  for (const [name, service] of Object.entries(all.services)) {
    if (service.build === undefined && !(service.image ?? '').startsWith('mcp-task-gateway')) continue
    const file = mountedFiles(service, all).get(IMAGE_CONFIG)
    expect(file, `${name} gets its configuration at ${IMAGE_CONFIG}`).toBeDefined()
    const env = environment(service)
    out.push({ name, service, file: file!, env, config: parseConfigText(await read(file!), env, file) })
  }
  expect(out.length).toBeGreaterThan(0)
  return out
}

describe('compose.yaml', () => {
  it('mounts only files that exist, and hands over only secrets it declares with a file that exists', async () => {
    const all = await compose()
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
    for (const { name, service, config, env } of await gateways()) {
      expect(service.secrets?.length, `${name} takes its configuration, with its tokens, from a secret`).toBeGreaterThan(0)
      expect(authConfigured(config.auth), `${name} has auth.tokens or auth.oauth`).toBe(true)
      expect(config.auth.tokens.length).toBeGreaterThan(0)
      expect(config.server.allowUnauthenticated).toBe(false)
      expect(env.GATEWAY_ALLOW_UNAUTHENTICATED).toBeUndefined()
      expect(openListenerProblems(config)).toEqual([])
      expect(config.server.host).toBe('0.0.0.0')
      expect(config.server.port).toBe(Number(env.GATEWAY_PORT))
      // Every process on one Redis needs the same one: it comes from the operator's shell, never from the file.
      expect(config.server.stateSecret).toBe(SHELL.GATEWAY_STATE_SECRET)
      expect(service.ports?.map((p) => composeValue(p, SHELL))).toContain(`${env.GATEWAY_PORT}:${env.GATEWAY_PORT}`)
    }
  })

  it('refuses to start without the state secret and the Redis password', async () => {
    const { gateway, redis } = (await compose()).services
    for (const missing of Object.keys(SHELL)) {
      const shell: Record<string, string> = { ...SHELL }
      delete shell[missing]
      expect(() => environment(gateway!, shell), `without ${missing}`).toThrow(new RegExp(missing))
    }
    expect(() => composeValue(redis!.command!.join(' '), {})).toThrow(/REDIS_PASSWORD/)
  })

  it('sets no variable that neither the configuration nor the image reads', async () => {
    const dockerfile = await read('Dockerfile')
    for (const { name, service, file } of await gateways()) {
      const text = await read(file)
      for (const variable of Object.keys(service.environment ?? {})) {
        const read = text.includes(`\${${variable}}`) || text.includes(`\${${variable}:-`) || new RegExp(`\\b${variable}\\b`).test(dockerfile)
        expect(read, `${name} sets ${variable}: ${file} or the Dockerfile reads it`).toBe(true)
      }
    }
  })

  it('runs the gateway on a Redis that wants a password, keeps its data, and is reachable only on the compose network', async () => {
    const all = await compose()
    const { redis } = all.services
    expect(redis?.image).toMatch(/^redis:\d+\.\d+\.\d+-[a-z]+$/)
    expect(redis!.command!.map((part) => composeValue(part, SHELL))).toEqual(expect.arrayContaining(['--requirepass', SHELL.REDIS_PASSWORD, '--appendonly', 'yes']))
    expect(redis!.ports ?? []).toEqual([])
    expect(redis!.volumes?.some((v) => v.endsWith(':/data'))).toBe(true)
    // redis-cli, the health check, reads the password from REDISCLI_AUTH.
    expect(redis!.healthcheck?.test.join(' ')).toContain('redis-cli ping')
    expect(composeValue(redis!.environment?.REDISCLI_AUTH ?? '', SHELL)).toBe(SHELL.REDIS_PASSWORD)
    for (const { name, service, config } of await gateways()) {
      expect(service.depends_on?.redis?.condition).toBe('service_healthy')
      expect(config.store.kind).toBe('redis')
      const url = new URL(config.store.kind === 'redis' ? config.store.url : '')
      expect(url.host, `${name} reaches the compose service redis`).toBe('redis:6379')
      expect(decodeURIComponent(url.password) || (config.store.kind === 'redis' ? config.store.password : undefined)).toBe(SHELL.REDIS_PASSWORD)
    }
  })

  it('stops the gateway after its grace has run out, not before', async () => {
    for (const { name, service, config } of await gateways()) {
      expect(service.stop_grace_period, `${name} sets stop_grace_period`).toBeDefined()
      expect(parseDuration(service.stop_grace_period!)).toBeGreaterThanOrEqual(config.server.shutdownGrace + CLOSE_MARGIN_MS)
    }
  })
})
