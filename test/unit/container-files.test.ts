// The Dockerfile as an operator runs it: pinned base images, an init process that reaps orphaned stdio
// grandchildren, a health check on the configured port, and a stop timeout longer than the gateway's shutdown
// grace. compose.yaml: compose-file.test.ts.
import { readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { parseConfigText } from '../../src/config/load.ts'

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url))
/** Docker's stop timeout when `docker run` / `docker stop` are given none. */
const DOCKER_DEFAULT_STOP_MS = 10_000
/** What the gateway needs after its grace to cancel what is left, mark the tasks and close. */
const CLOSE_MARGIN_MS = 2000

const read = async (file: string): Promise<string> => await readFile(`${REPO_ROOT}${file}`, 'utf8')

/** The Dockerfile's instructions (continuation lines joined), e.g. `[['FROM', 'node:… AS build'], …]`. */
async function dockerfile (): Promise<Array<[string, string]>> {
  const text = (await read('Dockerfile')).replace(/\\\n/g, ' ')
  return text.split('\n').filter((l) => l.trim() !== '' && !l.trimStart().startsWith('#')).map((line) => {
    const [keyword, ...rest] = line.trim().split(/\s+/)
    return [keyword!.toUpperCase(), rest.join(' ')]
  })
}

describe('the Dockerfile', () => {
  it('pins its base image to an exact version', async () => {
    const instructions = await dockerfile()
    const args = new Map(instructions.filter(([k]) => k === 'ARG').map(([, v]) => v.split('=') as [string, string]))
    const froms = instructions.filter(([k]) => k === 'FROM').map(([, v]) => v.split(' ')[0]!.replace(/^\$\{(\w+)\}$/, (_m, name: string) => args.get(name) ?? name))
    expect(froms.length).toBeGreaterThan(0)
    for (const image of froms) expect(image).toMatch(/^node:\d+\.\d+\.\d+-[a-z]+(-slim)?(@sha256:[0-9a-f]{64})?$/)
  })

  it('is built on the same Node release by scripts/node-base-image.sh, where no registry has node images', async () => {
    const pinned = /^ARG NODE_IMAGE=node:(\d+\.\d+\.\d+)-/m.exec(await read('Dockerfile'))?.[1]
    expect(pinned).toBeDefined()
    expect(/^NODE_VERSION=(\S+)$/m.exec(await read('scripts/node-base-image.sh'))?.[1]).toBe(pinned)
  })

  it('runs the gateway under an init process that reaps orphans and forwards SIGTERM', async () => {
    const instructions = await dockerfile()
    expect(instructions.find(([k]) => k === 'ENTRYPOINT')?.[1]).toMatch(/^\["\/usr\/bin\/tini", "--"\]$/)
    expect(instructions.some(([k, v]) => k === 'RUN' && /apt-get install [^&]*\btini\b/.test(v))).toBe(true)
    expect(instructions.find(([k]) => k === 'STOPSIGNAL')?.[1]).toBe('SIGTERM')
  })

  it('checks health on the port the configuration listens on, not a fixed one', async () => {
    const instructions = await dockerfile()
    const healthcheck = instructions.find(([k]) => k === 'HEALTHCHECK')?.[1] ?? ''
    // The check reads the file the gateway runs with (its port, and server.tls: healthcheck.test.ts).
    const command = JSON.parse(/CMD (\[.*\])$/.exec(healthcheck)?.[1] ?? '[]') as string[]
    const gateway = JSON.parse(instructions.find(([k]) => k === 'CMD')?.[1] ?? '[]') as string[]
    expect(command.slice(0, 2)).toEqual(['node', 'dist/healthcheck.js'])
    expect(command.slice(command.indexOf('--config'))).toEqual(gateway.slice(gateway.indexOf('--config')))
    expect(healthcheck).not.toMatch(/:8080\b/)
    const env = instructions.filter(([k]) => k === 'ENV').map(([, v]) => v).join(' ')
    const port = /GATEWAY_PORT=(\d+)/.exec(env)?.[1]
    const grace = /GATEWAY_SHUTDOWN_GRACE=(\S+)/.exec(env)?.[1]
    expect(port).toBeDefined()
    const config = parseConfigText(await read('config/gateway.yaml'), { GATEWAY_PORT: port!, GATEWAY_SHUTDOWN_GRACE: grace ?? '' })
    expect(config.server.port).toBe(Number(port))
    // `docker stop` with no timeout sends SIGKILL after 10 s: the grace must end well before.
    expect(config.server.shutdownGrace + CLOSE_MARGIN_MS).toBeLessThanOrEqual(DOCKER_DEFAULT_STOP_MS)
  })

  it('listens on every interface without auth only when the operator says so', async () => {
    const env = Object.fromEntries((await dockerfile()).filter(([k]) => k === 'ENV').flatMap(([, v]) => v.split(/\s+/).map((pair) => pair.split('=') as [string, string])))
    expect(env.GATEWAY_HOST).toBe('0.0.0.0')
    expect(env.GATEWAY_ALLOW_UNAUTHENTICATED).toBeUndefined()
    const text = await read('config/gateway.yaml')
    // The host comes from the environment, so the error names the variable rather than its value.
    expect(() => parseConfigText(text, env)).toThrow(/server\.host: the value of \$\{GATEWAY_HOST\} is reachable from other machines and auth is off.*server\.allowUnauthenticated: true/)
    expect(parseConfigText(text, { ...env, GATEWAY_ALLOW_UNAUTHENTICATED: 'true' }).server).toMatchObject({ host: '0.0.0.0', allowUnauthenticated: true })
  })
})
