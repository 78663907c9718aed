// The systemd unit that ships (deploy/systemd/mcp-task-gateway.service) starts the package's own bin with options
// the gateway has, on the configuration its comment installs; `systemctl reload` signals the gateway's own
// process and nobody else's; `systemctl stop` leaves the gateway its shutdown grace before SIGKILL, without
// signalling its stdio upstreams first; the store's directory is the state directory; the hardening is there.
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const UNIT = 'deploy/systemd/mcp-task-gateway.service'

/** `Key=value` lines by section; a key given more than once (Environment=) keeps every value. */
function parseUnit (text: string): Map<string, Map<string, string[]>> {
  const sections = new Map<string, Map<string, string[]>>()
  let section: Map<string, string[]> | undefined
  for (const raw of text.split('\n')) {
    const line = raw.trim()
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue
    const header = /^\[(.+)\]$/.exec(line)
    if (header) {
      section = new Map()
      sections.set(header[1]!, section)
      continue
    }
    const eq = line.indexOf('=')
    if (section === undefined || eq === -1) throw new Error(`${UNIT}: not a Key=value line in a section: ${line}`)
    const key = line.slice(0, eq)
    section.set(key, [...section.get(key) ?? [], line.slice(eq + 1)])
  }
  return sections
}

/** systemd's and the gateway's durations as they are written here: `20s`, `500ms`, `2min`. */
function ms (value: string): number {
  const match = /^(\d+)(ms|s|min)$/.exec(value)
  if (!match) throw new Error(`not a duration this test reads: ${value}`)
  return Number(match[1]) * { ms: 1, s: 1000, min: 60_000 }[match[2] as 'ms' | 's' | 'min']
}

const unit = parseUnit(readFileSync(join(ROOT, UNIT), 'utf8'))
const service = unit.get('Service')!
const one = (key: string): string => {
  const values = service.get(key)
  expect(values, `${key}= in [Service]`).toHaveLength(1)
  return values![0]!
}
const environment = Object.fromEntries((service.get('Environment') ?? []).map((pair) => pair.split('=', 2) as [string, string]))

describe(`the systemd unit ${UNIT}`, () => {
  it("starts the package's bin with node, from the package's directory, with options the gateway has", async () => {
    const bin = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { bin: Record<string, string> }).bin['mcp-task-gateway']!
    const dir = one('WorkingDirectory')
    const [node, script, ...args] = one('ExecStart').split(/\s+/)
    expect(node).toMatch(/^\/\S*\/node$/)
    expect(script).toBe(`${dir}/${bin}`)
    expect(args).toEqual(['--config', '/etc/mcp-task-gateway/gateway.yaml'])
    // The unit's own arguments and environment, from the checkout instead of /opt, on the file its comment
    // installs (config/gateway.yaml): the gateway accepts them and the configuration validates.
    const run = promisify(execFile)
    const { stdout } = await run(process.execPath, [join(ROOT, bin), ...args.map((a) => a.replace('/etc/mcp-task-gateway/gateway.yaml', 'config/gateway.yaml')), '--check'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', ...environment },
    })
    expect(stdout).toContain('configuration is valid')
  })

  it('reloads by SIGHUP to its own main process, never by a process name', () => {
    expect(one('ExecReload')).toBe('/bin/kill -HUP $MAINPID')
  })

  it('stops with SIGTERM to the gateway alone and SIGKILL only after its shutdown grace', () => {
    expect(one('KillSignal')).toBe('SIGTERM')
    // mixed: SIGTERM to the main process; the gateway stops its stdio upstreams itself once its calls are done.
    expect(one('KillMode')).toBe('mixed')
    const grace = ms(environment.GATEWAY_SHUTDOWN_GRACE!)
    expect(ms(one('TimeoutStopSec'))).toBeGreaterThanOrEqual(grace + 5000)
    const config = readFileSync(join(ROOT, 'config/gateway.yaml'), 'utf8')
    expect(config).toContain('shutdownGrace: ${GATEWAY_SHUTDOWN_GRACE')
    expect(config).toContain('path: ${GATEWAY_DATA_DIR')
  })

  it('keeps the store in its state directory and runs hardened, as a user of its own', () => {
    expect(environment.GATEWAY_DATA_DIR).toBe(`/var/lib/${one('StateDirectory')}`)
    expect(one('User')).not.toBe('root')
    const hardening = {
      NoNewPrivileges: 'yes',
      CapabilityBoundingSet: '',
      ProtectSystem: 'strict',
      ProtectHome: 'yes',
      PrivateTmp: 'yes',
      PrivateDevices: 'yes',
      RestrictSUIDSGID: 'yes',
      RestrictNamespaces: 'yes',
      RestrictAddressFamilies: 'AF_UNIX AF_INET AF_INET6',
      SystemCallFilter: '@system-service',
    }
    expect(Object.fromEntries(Object.keys(hardening).map((key) => [key, one(key)]))).toEqual(hardening)
    expect(unit.get('Install')?.get('WantedBy')).toEqual(['multi-user.target'])
  })
})
