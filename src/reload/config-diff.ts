import type { AuthConfig, Config, UpstreamConfig } from '../config/schema.ts'

/** One option (or upstream) a reload changes, as logged and answered: `upstreams.search`, `limits.pollBurst`. */
export interface ConfigChange {
  path: string
  change: 'added' | 'removed' | 'replaced' | 'changed'
}

export interface UpstreamChanges {
  added: UpstreamConfig[]
  removed: string[]
  /** Options other than filters and tool settings changed: a new instance takes over, the old one drains. */
  replaced: UpstreamConfig[]
  /** Only filters (tools, prompts, resources), toolSettings or taskSupport changed: applied to the running instance. */
  retuned: UpstreamConfig[]
}

export interface ConfigDiff {
  /** What the gateway runs with from now on: the new configuration, with the running values of `restartOnly`. */
  effective: Config
  /** What the reload applies, in the order it is logged. */
  changes: ConfigChange[]
  /** Options that changed in the file but take effect only at the next start (they keep their running value). */
  restartOnly: string[]
  upstreams: UpstreamChanges
}

/** Options read while the gateway runs; every other option of these sections is read once, at start. */
const LIVE = {
  server: ['reloadGrace', 'shutdownGrace', 'instructions'],
  // Loggers made at start (per upstream, admin) keep the level they were made with: logging needs a restart.
  logging: [],
  tasks: ['defaultTtl', 'maxTtl', 'pollInterval', 'pollIntervalMax', 'maxActivePerPrincipal', 'maxQueuedInputs', 'maxResultBytes', 'decide'],
  limits: ['requestsPerIp', 'requestsPerPrincipal', 'taskOpsPerPrincipal', 'pollBurst', 'sessionsPerPrincipal', 'storedBytesPerPrincipal', 'clientInfoBytes'],
  auth: ['tokens', 'permissions'],
} as const

/** Upstream options a running upstream takes in place (they shape its lists and calls, not its connection). */
const RETUNABLE: ReadonlySet<string> = new Set(['tools', 'prompts', 'resources', 'toolSettings', 'taskSupport', 'instructions'])

function same (a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b)
}

/** Whether auth is on (every request needs a token) and how: turning it on or off, or OAuth, needs a restart. */
function authMode (auth: AuthConfig): string {
  return JSON.stringify({ on: auth.tokens.length > 0 || auth.oauth !== undefined, oauth: auth.oauth })
}

/**
 * Compares one section key by key: a changed live key takes its new value (a change), any other changed key
 * keeps its running value (restart only). Returns the section to run with.
 */
function section<T extends object> (name: string, before: T, after: T, live: readonly string[], diff: Pick<ConfigDiff, 'changes' | 'restartOnly'>): T {
  const result: Record<string, unknown> = { ...after as Record<string, unknown> }
  const keys = new Set([...Object.keys(before), ...Object.keys(after)])
  for (const key of keys) {
    const was = (before as Record<string, unknown>)[key]
    const now = (after as Record<string, unknown>)[key]
    if (same(was, now)) continue
    if (live.includes(key)) {
      diff.changes.push({ path: `${name}.${key}`, change: 'changed' })
    } else {
      diff.restartOnly.push(`${name}.${key}`)
      if (was === undefined) delete result[key]
      else result[key] = was
    }
  }
  return result as T
}

/** A section read only at start, whose every change needs a restart. */
function startOnly<T> (name: string, before: T, after: T, restartOnly: string[]): T {
  if (before === undefined || after === undefined || typeof before !== 'object' || typeof after !== 'object' || before === null || after === null) {
    if (!same(before, after)) restartOnly.push(name)
    return before
  }
  section(name, before, after, [], { changes: [], restartOnly })
  return before
}

function upstreamChanges (before: readonly UpstreamConfig[], after: readonly UpstreamConfig[], changes: ConfigChange[]): UpstreamChanges {
  const result: UpstreamChanges = { added: [], removed: [], replaced: [], retuned: [] }
  const old = new Map(before.map((u) => [u.name, u]))
  const names = new Set(after.map((u) => u.name))
  for (const upstream of before) {
    if (names.has(upstream.name)) continue
    result.removed.push(upstream.name)
    changes.push({ path: `upstreams.${upstream.name}`, change: 'removed' })
  }
  for (const upstream of after) {
    const was = old.get(upstream.name)
    if (was === undefined) {
      result.added.push(upstream)
      changes.push({ path: `upstreams.${upstream.name}`, change: 'added' })
      continue
    }
    const keys = new Set([...Object.keys(was), ...Object.keys(upstream)])
    const changed = [...keys].filter((key) => !same((was as Record<string, unknown>)[key], (upstream as Record<string, unknown>)[key]))
    if (changed.length === 0) continue
    if (changed.every((key) => RETUNABLE.has(key))) {
      result.retuned.push(upstream)
      for (const key of changed) changes.push({ path: `upstreams.${upstream.name}.${key}`, change: 'changed' })
    } else {
      result.replaced.push(upstream)
      changes.push({ path: `upstreams.${upstream.name}`, change: 'replaced' })
    }
  }
  return result
}

/**
 * What reloading `next` over the running `current` configuration does: which options and upstreams change
 * now, and which options changed but are read only at start (listener, TLS, store, admin listener, metrics, tracing,
 * stateSecret, OAuth, turning auth on or off, stream limits, timers): those keep their running values.
 */
export function diffConfig (current: Config, next: Config): ConfigDiff {
  const diff: Pick<ConfigDiff, 'changes' | 'restartOnly'> = { changes: [], restartOnly: [] }
  const server = section('server', current.server, next.server, LIVE.server, diff)
  const logging = section('logging', current.logging, next.logging, LIVE.logging, diff)
  const tasks = section('tasks', current.tasks, next.tasks, LIVE.tasks, diff)
  const limits = section('limits', current.limits, next.limits, LIVE.limits, diff)
  let auth: AuthConfig
  if (authMode(current.auth) === authMode(next.auth)) {
    auth = section('auth', current.auth, next.auth, LIVE.auth, diff)
  } else {
    auth = current.auth
    for (const key of ['tokens', 'permissions', 'oauth'] as const) if (!same(current.auth[key], next.auth[key])) diff.restartOnly.push(`auth.${key}`)
  }
  const store = startOnly('store', current.store, next.store, diff.restartOnly)
  const admin = startOnly('admin', current.admin, next.admin, diff.restartOnly)
  const metrics = startOnly('metrics', current.metrics, next.metrics, diff.restartOnly)
  const tracing = startOnly('tracing', current.tracing, next.tracing, diff.restartOnly)
  const upstreams = upstreamChanges(current.upstreams, next.upstreams, diff.changes)
  const effective: Config = { server, logging, store, tasks, auth, limits, admin, metrics, tracing, upstreams: next.upstreams }
  return { ...diff, effective, upstreams }
}
