// What a configuration reload applies, replaces, retunes, and leaves for the next start.
import { describe, expect, it } from 'vitest'
import { parseConfig } from '../../src/config/load.ts'
import type { Config } from '../../src/config/schema.ts'
import { diffConfig } from '../../src/reload/config-diff.ts'

const HASH = 'a'.repeat(64)
const upstream = (name: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ name, transport: 'stdio', command: 'node', ...extra })

function config (extra: Record<string, unknown> = {}, upstreams = [upstream('a'), upstream('b')]): Config {
  return parseConfig({ store: { kind: 'memory' }, upstreams, ...extra }, {})
}

describe('diffConfig()', () => {
  it('finds nothing to do for the same file', () => {
    const diff = diffConfig(config(), config())
    expect({ changes: diff.changes, restartOnly: diff.restartOnly }).toEqual({ changes: [], restartOnly: [] })
  })

  it('adds, removes, retunes (filters, tool settings) and replaces (any other option) upstreams, in the order of the new file', () => {
    const before = config({}, [upstream('a'), upstream('b'), upstream('c')])
    const after = config({}, [upstream('d'), upstream('c', { env: { MODE: 'x' } }), upstream('a', { tools: { deny: ['rm'] }, toolSettings: { slow: { idempotent: true } } })])
    const diff = diffConfig(before, after)
    expect(diff.upstreams.removed).toEqual(['b'])
    expect(diff.upstreams.added.map((u) => u.name)).toEqual(['d'])
    expect(diff.upstreams.replaced.map((u) => u.name)).toEqual(['c'])
    expect(diff.upstreams.retuned.map((u) => u.name)).toEqual(['a'])
    expect(diff.changes).toEqual([
      { path: 'upstreams.b', change: 'removed' },
      { path: 'upstreams.d', change: 'added' },
      { path: 'upstreams.c', change: 'replaced' },
      { path: 'upstreams.a.tools', change: 'changed' },
      { path: 'upstreams.a.toolSettings', change: 'changed' },
    ])
    expect(diff.effective.upstreams.map((u) => u.name)).toEqual(['d', 'c', 'a'])
  })

  it('keeps the running value of options read only at start and names them, while applying the live ones', () => {
    const before = config({ server: { port: 8080 }, tasks: { maxActivePerPrincipal: 5 } })
    const after = config({ server: { port: 9090, reloadGrace: '1m' }, store: { kind: 'sqlite' }, tasks: { maxActivePerPrincipal: 6, sweepInterval: '1m' }, limits: { pollBurst: 3, maxConnections: 10 }, tracing: { enabled: true, endpoint: 'http://127.0.0.1:4318/v1/traces' } })
    const diff = diffConfig(before, after)
    expect(diff.restartOnly.sort()).toEqual(['limits.maxConnections', 'server.port', 'store.busyWait', 'store.kind', 'store.lockStaleAfter', 'store.path', 'tasks.sweepInterval', 'tracing.enabled'])
    expect(diff.changes).toEqual([
      { path: 'server.reloadGrace', change: 'changed' },
      { path: 'tasks.maxActivePerPrincipal', change: 'changed' },
      { path: 'limits.pollBurst', change: 'changed' },
    ])
    expect(diff.effective.server).toMatchObject({ port: 8080, reloadGrace: 60_000 })
    expect(diff.effective.store).toEqual({ kind: 'memory' })
    expect(diff.effective.tracing.enabled).toBe(false)
    expect(diff.effective.tasks).toMatchObject({ maxActivePerPrincipal: 6, sweepInterval: before.tasks.sweepInterval })
    expect(diff.effective.limits).toMatchObject({ pollBurst: 3, maxConnections: before.limits.maxConnections })
  })

  it('applies token and permission changes, but waits for a restart to turn auth on or off', () => {
    const tokens = (...names: string[]): Record<string, unknown> => ({ tokens: names.map((principal) => ({ principal, sha256: HASH, scopes: ['s'] })) })
    const live = diffConfig(config({ auth: tokens('alice') }), config({ auth: { ...tokens('bob'), permissions: [{ scope: 's', upstreams: ['a'] }] } }))
    expect(live.changes).toEqual([{ path: 'auth.tokens', change: 'changed' }, { path: 'auth.permissions', change: 'changed' }])
    expect(live.effective.auth.tokens.map((t) => t.principal)).toEqual(['bob'])

    const on = diffConfig(config(), config({ auth: tokens('alice') }))
    expect(on.changes).toEqual([])
    expect(on.restartOnly).toEqual(['auth.tokens'])
    expect(on.effective.auth.tokens).toEqual([])
  })
})
