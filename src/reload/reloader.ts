import { setTimeout as delay } from 'node:timers/promises'
import type { HeldExchanges } from '../auth/held-exchanges.ts'
import type { Catalog } from '../catalog/catalog.ts'
import type { Config } from '../config/schema.ts'
import { formatDuration } from '../config/units.ts'
import { GatewayError, errorMessage } from '../errors.ts'
import type { Logger } from '../observability/logger.ts'
import { Upstream } from '../upstream/upstream.ts'
import { type UpstreamEvents } from '../upstream/upstream-events.ts'
import { diffConfig, type ConfigChange } from './config-diff.ts'
import type { LiveSettings } from './live-settings.ts'
import { settled } from '../observability/ignored.ts'

/** An upstream a reload removed or replaced, still finishing the calls it ran (`server.reloadGrace`). */
export interface LeavingUpstream {
  upstream: Upstream
  why: 'removed' | 'replaced'
  /** When what still runs on it is cancelled (ms since the epoch). */
  graceEndsAt: number
}

/** What a reload did: the changes it applied, and the changed options that need a restart (not applied). */
export interface ReloadReport {
  changes: ConfigChange[]
  restartOnly: string[]
}

export interface ReloaderDeps {
  live: LiveSettings
  /** The gateway's upstreams, shared with the catalog, health, admin and metrics: changed in place. */
  upstreams: Upstream[]
  catalog: Catalog
  /** What new upstreams report to (the catalog's sync). */
  events: UpstreamEvents
  /** Tells every client of this process that its lists changed. */
  listsChanged (): void
  /** The streams and held exchanges of this process, ended when the credential they were opened with is revoked. */
  exchanges?: HeldExchanges | undefined
  log: Logger
}

/** How often a leaving upstream is checked for calls still running. */
const DRAIN_CHECK_MS = 50

/**
 * Applies a new configuration to the running gateway (SIGHUP, POST /admin/reload): the options read per
 * request through LiveSettings, and the upstreams. An upstream added starts (its lists are announced once
 * read); one removed or replaced leaves the catalog at once, while the calls and tasks already running on it
 * get `server.reloadGrace` to end before they are cancelled and it is closed. Reloads run one at a time.
 */
export class Reloader {
  readonly #deps: ReloaderDeps
  readonly #leaving = new Map<Upstream, { drained: Promise<void>, entry: LeavingUpstream }>()
  readonly #closing = new AbortController()
  #queue: Promise<unknown> = Promise.resolve()

  constructor (deps: ReloaderDeps) {
    this.#deps = deps
  }

  /** Puts `next` in force (see diffConfig for the options that need a restart) and says what changed. */
  async reload (next: Config): Promise<ReloadReport> {
    const run = this.#queue.then(() => this.#apply(next))
    // The next reload waits for this one either way; this one's failure goes to its caller below.
    this.#queue = settled(run)
    return await run
  }

  /** Upstreams still draining after a reload are closed now (the gateway is shutting down). */
  async close (): Promise<void> {
    this.#closing.abort()
    await Promise.all([...this.#leaving.values()].map(({ drained }) => drained))
  }

  /** The upstreams that left the configuration and still finish their calls (the admin API shows them draining). */
  leaving (): LeavingUpstream[] {
    return [...this.#leaving.values()].map(({ entry }) => entry)
  }

  #apply (next: Config): ReloadReport {
    const { live, log } = this.#deps
    if (this.#closing.signal.aborted) throw new GatewayError('GW_ERR_SHUTTING_DOWN')
    const diff = diffConfig(live.config, next)
    if (diff.restartOnly.length > 0) {
      log.warn({ options: diff.restartOnly }, `configuration reload: ${diff.restartOnly.join(', ')} changed but take effect only at a restart; the running values stay`)
    }
    live.apply(diff.effective)
    if (diff.changes.some((c) => c.path.startsWith('auth.'))) this.#revoke()
    this.#applyUpstreams(diff.effective, diff.upstreams)
    for (const { path, change } of diff.changes) log.info({ option: path, change }, `configuration reload: ${path} ${change}`)
    if (diff.changes.length === 0) log.info('configuration reload: nothing to change')
    return { changes: diff.changes, restartOnly: diff.restartOnly }
  }

  /**
   * Revocation bites at once: every stream and held exchange of this process whose credential no longer
   * authenticates its principal, or now grants less, ends before the reload is answered.
   */
  #revoke (): void {
    const { live, exchanges, log } = this.#deps
    const authenticator = live.authenticator
    if (exchanges === undefined || authenticator === undefined) return
    const ended = exchanges.revoke((caller) => authenticator.recheck(caller))
    if (ended > 0) log.info({ ended }, `configuration reload: ended ${ended} streams and held exchanges whose credential was revoked or narrowed`)
  }

  #applyUpstreams (config: Config, changes: ReturnType<typeof diffConfig>['upstreams']): void {
    const { upstreams, catalog, events, log, live } = this.#deps
    const byName = new Map(upstreams.map((u) => [u.name, u]))
    const removed: Upstream[] = []
    const replaced: Upstream[] = []
    const started: Upstream[] = []
    for (const name of changes.removed) {
      removed.push(byName.get(name)!)
      byName.delete(name)
    }
    for (const upstream of [...changes.replaced, ...changes.added]) {
      const old = byName.get(upstream.name)
      if (old !== undefined) replaced.push(old)
      const fresh = new Upstream(upstream, log, events, live.credentialSources)
      byName.set(upstream.name, fresh)
      started.push(fresh)
    }
    for (const upstream of changes.retuned) byName.get(upstream.name)!.retune(upstream)
    // Key files and variables are read again: a rotated key is used from the next request on.
    for (const upstream of byName.values()) if (!started.includes(upstream)) upstream.credentials?.reload?.()
    // Configuration order decides which upstream keeps a name two of them offer.
    upstreams.splice(0, upstreams.length, ...config.upstreams.map((u) => byName.get(u.name)!))
    if (removed.length + replaced.length + started.length > 0) {
      catalog.upstreamsChanged(removed)
      this.#deps.listsChanged()
    }
    // Each one announces its lists to every client once it is up and they are read.
    for (const upstream of started) void upstream.start()
    for (const upstream of changes.retuned) {
      const retuned = byName.get(upstream.name)!
      catalog.refresh(retuned).then(() => this.#deps.listsChanged(), (err: unknown) => {
        log.warn({ upstream: upstream.name, err: errorMessage(err) }, 'could not read the lists of a retuned upstream')
      })
    }
    const grace = config.server.reloadGrace
    for (const upstream of removed) this.#drain(upstream, 'removed', grace, `a configuration reload removed it; calls still running after server.reloadGrace (${formatDuration(grace)}) were cancelled`)
    for (const upstream of replaced) this.#drain(upstream, 'replaced', grace, `a configuration reload replaced it; calls still running on the previous instance after server.reloadGrace (${formatDuration(grace)}) were cancelled`)
  }

  /** Lets the calls running on a leaving upstream end (up to `graceMs`), then closes it; what still runs fails with `reason`. */
  #drain (upstream: Upstream, why: LeavingUpstream['why'], graceMs: number, reason: string): void {
    const log = this.#deps.log
    const busy = (): number => upstream.load.active + upstream.load.waiting + upstream.load.parked
    const deadline = Date.now() + graceMs
    const drained = (async () => {
      while (busy() > 0 && Date.now() < deadline && !this.#closing.signal.aborted) {
        const pause = Math.min(DRAIN_CHECK_MS, Math.max(1, deadline - Date.now()))
        // Cut short when the reloader closes (the wait rejects): the loop then ends on its own.
        await settled(delay(pause, undefined, { signal: this.#closing.signal }))
      }
      const cancelled = busy()
      if (this.#closing.signal.aborted) {
        await upstream.close()
        return
      }
      if (cancelled > 0) log.warn({ upstream: upstream.name, calls: cancelled, graceMs }, 'server.reloadGrace is over: cancelling the calls still running on an upstream a reload removed or replaced')
      await upstream.close(new GatewayError('GW_ERR_UPSTREAM_UNAVAILABLE', [upstream.name, reason]))
      log.info({ upstream: upstream.name, cancelled }, 'closed the previous instance of an upstream after a configuration reload')
    })().catch((err: unknown) => log.warn({ upstream: upstream.name, err }, 'could not close an upstream a reload removed'))
      .finally(() => this.#leaving.delete(upstream))
    this.#leaving.set(upstream, { drained, entry: { upstream, why, graceEndsAt: deadline } })
  }
}

/** The problems, with their YAML paths, of a configuration that did not load (empty when it could not be read). */
export function configProblems (err: unknown): Array<{ path: string, message: string }> {
  return err instanceof GatewayError && err.code === 'GW_ERR_CONFIG_INVALID' && Array.isArray(err.data) ? err.data as Array<{ path: string, message: string }> : []
}

/** Logs why a new configuration was not taken (`via`: SIGHUP or the admin API): each problem on its own line. */
export function logRejectedReload (log: Pick<Logger, 'error'>, err: unknown, via: string): void {
  const problems = configProblems(err)
  for (const problem of problems) log.error({ path: problem.path, problem: problem.message, via }, `configuration reload: ${problem.path}: ${problem.message}`)
  log.error({ err: errorMessage(err), problems: problems.length, via }, 'configuration reload rejected: the running configuration stays in force')
}
