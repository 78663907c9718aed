import { ANONYMOUS_CALLER, type Caller } from '../auth/access.ts'
import type { TaskSupport, UpstreamConfig } from '../config/schema.ts'
import { upstreamPrefix } from '../config/schema.ts'
import { GatewayError, errorMessage } from '../errors.ts'
import type { Logger } from '../observability/logger.ts'
import type { ClientRef } from '../upstream/client-ref.ts'
import { type Upstream } from '../upstream/upstream.ts'
import { GATEWAY_CLIENT, credentialTag } from '../upstream/client-ref.ts'
import type { UpstreamSession } from '../upstream/upstream-session.ts'
import { credentialFailure } from '../upstream/credentials/upstream-credentials.ts'
import { CatalogView, type RemovedUpstream, type ViewPart } from './catalog-view.ts'
import { compileFilter } from '../config/name-filter.ts'
import { fetchSnapshot, type UpstreamSnapshot } from './snapshot.ts'
import { ListTemplates } from './list-templates.ts'

export type ListChange = 'tools' | 'prompts' | 'resources'

/** Lists that changed on one session; `template`: they are now what every new session with its capabilities lists. */
export interface CatalogChange {
  upstream: Upstream
  session: UpstreamSession
  kinds: ListChange[]
  template: boolean
}

interface Snapshot extends UpstreamSnapshot {
  /** Unique per load: views are cached by the snapshots they are made of. */
  readonly id: number
}

interface SessionLists {
  snapshot: Snapshot | undefined
  loading: Promise<Snapshot> | undefined
  /** A list change arrived while loading: load again before answering. */
  dirty: boolean
  /** The kinds of list the upstream announced as changed since the last load. */
  announced: Set<ListChange>
}

/** Merged views kept at once (one per distinct combination of upstream lists). */
const VIEW_CACHE_LIMIT = 256
/** What new sessions list, kept per upstream for this many list keys (capability sets) at most. */
const TEMPLATE_LIMIT = 256

/** A refusal of an upstream session: the client gets it, rather than a view without that upstream. */
function isSessionRefusal (err: unknown): err is GatewayError {
  return err instanceof GatewayError && (err.code === 'GW_ERR_UPSTREAM_SESSION_LIMIT' || err.code === 'GW_ERR_UPSTREAM_SESSION_SHARE')
}

/** The task support the gateway advertises for a tool: its own setting, else the upstream's. */
export function taskPolicy (config: UpstreamConfig, tool: string): TaskSupport {
  return config.toolSettings[tool]?.taskSupport ?? config.taskSupport
}

function changedKinds (before: UpstreamSnapshot, after: UpstreamSnapshot): ListChange[] {
  const same = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b)
  const kinds: ListChange[] = []
  if (!same(before.tools, after.tools)) kinds.push('tools')
  if (!same(before.prompts, after.prompts)) kinds.push('prompts')
  if (!same(before.resources, after.resources) || !same(before.resourceTemplates, after.resourceTemplates)) kinds.push('resources')
  return kinds
}

/**
 * What each client sees of the upstreams. A client's view of an upstream is what its own upstream session
 * lists; before it has one, what a new session with its capabilities lists (the template of its list key,
 * taken from a session on which no call has run yet, such as the gateway's own). Lists are read once per
 * session and again, coalesced, when the session reports a change; a client is told of a change of its
 * own session's lists, and every client of a change of a template.
 */
export class Catalog {
  readonly #upstreams: readonly Upstream[]
  /** The same upstreams by name, rebuilt when a reload changes them (upstreamsChanged). */
  #byName: ReadonlyMap<string, Upstream>
  readonly #log: Logger
  readonly #onChange: (change: CatalogChange) => void
  readonly #sessions = new WeakMap<UpstreamSession, SessionLists>()
  /** Per upstream, by list key: what a new session lists. */
  readonly #templates = new ListTemplates<Snapshot>(TEMPLATE_LIMIT)
  readonly #views = new Map<string, CatalogView>()
  /** The last view built for each client, with the snapshot each upstream gave it (bounded like the views). */
  readonly #recent = new Map<string, { view: CatalogView, snapshots: ReadonlyArray<Snapshot | undefined>, complete: boolean }>()
  readonly #native = new Map<string, Map<string, TaskSupport>>()
  /** Upstreams a reload removed, by name, until one of that name is configured again. */
  readonly #removed = new Map<string, RemovedUpstream>()
  #ids = 0
  #base: CatalogView | undefined
  /** Per upstream: the read of its lists after it came up (last time). */
  readonly #reading = new Map<string, Promise<void>>()
  /** Every upstream's first connect has ended and the lists of those that came up are read. */
  #started: Promise<void> | undefined
  #warm = false

  constructor (upstreams: readonly Upstream[], log: Logger, onChange: (change: CatalogChange) => void) {
    this.#upstreams = upstreams
    this.#byName = new Map(upstreams.map((upstream) => [upstream.name, upstream]))
    this.#log = log
    this.#onChange = onChange
  }

  /** The upstream of that name in the configuration in force (a reload may add, replace and remove them). */
  upstream (name: string): Upstream | undefined {
    return this.#byName.get(name)
  }

  /**
   * Resolves once every upstream's first connect has ended and the lists of those that came up are read
   * (upstreamReady reads them); returns the view of that moment, whose collisions stop the gateway.
   * Until then, views wait for it: a client that comes early sees every upstream that could come up.
   */
  async start (): Promise<CatalogView> {
    this.#started ??= Promise.all(this.#upstreams.map(async (upstream) => {
      await upstream.firstAttempt
      await this.#reading.get(upstream.name)
    })).then(() => { this.#warm = true })
    await this.#started
    return this.base()
  }

  /** Until every upstream's first lists are read (see start): the promise of that; undefined once they are, or before start. */
  get starting (): Promise<void> | undefined {
    return this.#warm ? undefined : this.#started
  }

  /** What a client with no capabilities and no session sees. */
  base (): CatalogView {
    const parts: ViewPart[] = []
    for (const upstream of this.#upstreams) {
      const snapshot = upstream.state === 'ready' ? this.#templates.get(upstream.name, upstream.listKeyOf(GATEWAY_CLIENT)) : undefined
      if (snapshot) parts.push({ upstream, snapshot })
    }
    this.#base = this.#cached(parts)
    return this.#base
  }

  /**
   * The merged namespace `client` sees; opens the client's upstream sessions where no template tells (with
   * the caller's Authorization header for upstreams that are sent it), but only of upstreams the caller may
   * use as a whole: the others are read from the gateway's own session, so neither a process nor the
   * caller's token goes to an upstream the caller has no business with. An upstream that refuses the
   * client a session (GW_ERR_UPSTREAM_SESSION_LIMIT, _SHARE) fails the view with that refusal: the client
   * is never shown a shorter list, nor told that a tool of that upstream is unknown.
   */
  async view (client: ClientRef, caller: Caller = ANONYMOUS_CALLER): Promise<CatalogView> {
    if (!this.#warm && this.#started !== undefined) await this.#started
    return this.#viewNow(client, caller) ?? await this.#viewLater(client, caller)
  }

  /** Recent views are by client and, when the caller's own Authorization header is forwarded, by that header. */
  #recentKey (client: ClientRef, caller: Caller): string {
    return caller.authorization === undefined ? client.key : `${client.key}\u0000${credentialTag(caller.authorization)}`
  }

  /** The client's last view while every upstream would still give it the same snapshot (a call of a known client). */
  #viewNow (client: ClientRef, caller: Caller): CatalogView | undefined {
    const recent = this.#recent.get(this.#recentKey(client, caller))
    if (recent === undefined || !recent.complete) return undefined
    for (const [i, upstream] of this.#upstreams.entries()) {
      const session = upstream.sessionOf(client, caller.authorization)
      let snapshot: Snapshot | undefined
      if (session !== undefined) {
        const state = this.#sessions.get(session)
        if (state?.snapshot === undefined || state.loading !== undefined) return undefined
        snapshot = state.snapshot
      } else if (upstream.state === 'ready') {
        snapshot = this.#templates.get(upstream.name, upstream.listKeyOf(client, caller.authorization))
      }
      if (snapshot !== recent.snapshots[i]) return undefined
    }
    return recent.view
  }

  async #viewLater (client: ClientRef, caller: Caller): Promise<CatalogView> {
    let complete = true
    let refusal: GatewayError | undefined
    const snapshots = await Promise.all(this.#upstreams.map(async (upstream): Promise<Snapshot | undefined> => {
      try {
        return await this.#snapshotFor(upstream, client, caller)
      } catch (err) {
        complete = false
        if (isSessionRefusal(err)) refusal ??= err
        else this.#log.warn({ upstream: upstream.name, client: client.key, err: errorMessage(err) }, 'could not read upstream lists for a client')
        return undefined
      }
    }))
    if (refusal !== undefined) throw refusal
    const present: ViewPart[] = []
    for (const [i, snapshot] of snapshots.entries()) if (snapshot !== undefined) present.push({ upstream: this.#upstreams[i]!, snapshot })
    const view = complete ? this.#cached(present) : this.#build(present)
    const key = this.#recentKey(client, caller)
    this.#recent.delete(key)
    this.#recent.set(key, { view, snapshots, complete })
    if (this.#recent.size > VIEW_CACHE_LIMIT * 4) this.#recent.delete(this.#recent.keys().next().value!)
    return view
  }

  /**
   * Whether what `client` lists and reads is what every client gets: it declares no capabilities and has
   * no session of its own whose state could show, and no upstream was sent its own Authorization header
   * (2026-07-28 results may then be cached for everyone).
   */
  isCommon (client: ClientRef, authorization?: string): boolean {
    if (authorization !== undefined && this.#upstreams.some((u) => u.forwardsAuthorization)) return false
    return client.signature === '{}' && this.#upstreams.every((u) => u.config.sessions !== 'per-client' || u.sessionOf(client) === undefined)
  }

  /** Without waiting: the last view built for `client`, else the base view. */
  peek (client: ClientRef): CatalogView {
    return this.#recent.get(client.key)?.view ?? this.#base ?? this.base()
  }

  /** The tools (by their own names) the upstream itself runs as tasks, as seen in any of its sessions so far. */
  nativeTools (upstream: string): ReadonlyMap<string, TaskSupport> {
    return this.#native.get(upstream) ?? new Map()
  }

  /** Whether the upstream itself runs the tool (by its own name) as a task: `optional`, `required`, or undefined when it does not. */
  nativeTaskSupport (upstream: string, tool: string): TaskSupport | undefined {
    return this.#native.get(upstream)?.get(tool)
  }

  /** List keys whose lists are kept for the upstream (bounded). */
  templateCount (upstream: string): number {
    return this.#templates.size(upstream)
  }

  /**
   * A session reported a list change: read its lists again (coalesced with a read under way). Its client is
   * told of the kinds the upstream announced, as it would be without the gateway, whether or not they differ.
   */
  listChanged (upstream: Upstream, session: UpstreamSession, kind: ListChange): void {
    // An upstream a reload removed or replaced may still finish calls: its lists are no longer anyone's.
    if (!this.#upstreams.includes(upstream)) return
    const state = this.#state(session)
    state.announced.add(kind)
    if (state.loading !== undefined) {
      state.dirty = true
      return
    }
    this.#listsOf(upstream, session, true).catch((err: unknown) => {
      this.#log.warn({ upstream: upstream.name, err: errorMessage(err) }, 'could not read upstream lists after a change')
    })
  }

  /** The upstream came back: its gateway session is new, and what new sessions list may have changed. */
  async upstreamReady (upstream: Upstream): Promise<void> {
    if (!this.#upstreams.includes(upstream)) return
    const reading = (async () => {
      this.#templates.forget(upstream.name)
      await this.#listsOf(upstream, upstream.gatewaySession())
      this.base()
      // A client's last view may lack the upstream altogether (it was down, or added by a reload).
      this.#recent.clear()
    })()
    this.#reading.set(upstream.name, reading.catch((err: unknown) => {
      this.#log.warn({ upstream: upstream.name, err: errorMessage(err) }, 'could not read upstream lists')
    }))
    await reading
  }

  /** The upstream went down: it leaves the views of clients that have no session with it. */
  upstreamDown (): void {
    this.base()
  }

  /**
   * A reload changed the upstreams (the array the catalog was given, changed in place): views are built
   * again; the names of `removed` upstreams get "unavailable: a configuration reload removed it".
   */
  upstreamsChanged (removed: readonly Upstream[]): void {
    for (const upstream of removed) {
      const snapshot = this.#templates.get(upstream.name, upstream.listKeyOf(GATEWAY_CLIENT))
      this.#removed.set(upstream.name, { prefix: upstreamPrefix(upstream.config), snapshot })
      this.#templates.forget(upstream.name)
      this.#native.delete(upstream.name)
    }
    for (const upstream of this.#upstreams) this.#removed.delete(upstream.name)
    this.#byName = new Map(this.#upstreams.map((upstream) => [upstream.name, upstream]))
    this.#views.clear()
    this.#recent.clear()
    this.base()
  }

  /** A reload retuned the upstream (filters, tool settings): every list of it is read again. */
  async refresh (upstream: Upstream): Promise<void> {
    if (!this.#upstreams.includes(upstream)) return
    this.#recent.clear()
    const reads = [...upstream.clientSessions].map(async (session) => {
      await this.#listsOf(upstream, session, true).catch((err: unknown) => {
        this.#log.warn({ upstream: upstream.name, session: session.key, err: errorMessage(err) }, 'could not read upstream lists after a reload')
      })
    })
    // What new sessions list is read again too, starting from the gateway's own session.
    this.#templates.forget(upstream.name)
    if (upstream.state === 'ready') reads.push(this.#listsOf(upstream, upstream.gatewaySession(), true).then(() => {}))
    await Promise.all(reads)
    this.base()
  }

  /** With no credential for this caller now (a token refused, its server down): the gateway's own lists; a call is told why. */
  async #snapshotFor (upstream: Upstream, client: ClientRef, caller: Caller): Promise<Snapshot | undefined> {
    return await this.#ownSnapshot(upstream, client, caller).catch((err: unknown) => {
      if (credentialFailure(err) === undefined) throw err
      return this.#templates.get(upstream.name, upstream.listKeyOf(GATEWAY_CLIENT))
    })
  }

  async #ownSnapshot (upstream: Upstream, client: ClientRef, caller: Caller): Promise<Snapshot | undefined> {
    const session = upstream.sessionOf(client, caller.authorization)
    if (session !== undefined) return await this.#listsOf(upstream, session)
    if (upstream.state !== 'ready') return undefined
    const template = this.#templates.get(upstream.name, upstream.listKeyOf(client, caller.authorization))
    if (template) return template
    if (!caller.access.upstream(upstream.name)) return this.#templates.get(upstream.name, upstream.listKeyOf(GATEWAY_CLIENT))
    const lease = await upstream.acquire(client, 'call', caller.authorization)
    try {
      return await this.#listsOf(upstream, lease.session)
    } finally {
      lease.release()
    }
  }

  /** The session's lists: read once, then again after each change it reports (`refresh`). */
  async #listsOf (upstream: Upstream, session: UpstreamSession, refresh = false): Promise<Snapshot> {
    const state = this.#state(session)
    if (state.loading !== undefined) return await state.loading
    if (state.snapshot !== undefined && !refresh) return state.snapshot
    state.loading = this.#load(upstream, session, state)
    return await state.loading
  }

  #state (session: UpstreamSession): SessionLists {
    let state = this.#sessions.get(session)
    if (state === undefined) {
      state = { snapshot: undefined, loading: undefined, dirty: false, announced: new Set() }
      this.#sessions.set(session, state)
    }
    return state
  }

  async #load (upstream: Upstream, session: UpstreamSession, state: SessionLists): Promise<Snapshot> {
    const config = upstream.config
    const filters = {
      tools: compileFilter(config.tools),
      prompts: compileFilter(config.prompts),
      resources: compileFilter(config.resources),
    }
    let snapshot: Snapshot
    try {
      do {
        state.dirty = false
        const fetched = await fetchSnapshot(
          session,
          upstreamPrefix(config),
          filters,
          config.timeouts.request,
          (name) => taskPolicy(config, name),
        )
        snapshot = { ...fetched, id: ++this.#ids }
      } while (state.dirty)
    } finally {
      state.loading = undefined
    }
    const before = state.snapshot ?? this.#templates.get(upstream.name, session.listKey)
    state.snapshot = snapshot
    const native = this.#native.get(upstream.name) ?? new Map<string, TaskSupport>()
    this.#native.set(upstream.name, native)
    for (const item of snapshot.tools) {
      if (item.nativeTaskSupport === 'required' || item.nativeTaskSupport === 'optional') native.set(item.target, item.nativeTaskSupport)
    }
    // A session on which no call ran lists what any new session with its capabilities lists.
    const template = session.pristine || config.sessions !== 'per-client'
    const templateBefore = this.#templates.get(upstream.name, session.listKey)
    if (template) this.#templates.set(upstream.name, session.listKey, snapshot, session.listKey === upstream.listKeyOf(GATEWAY_CLIENT))
    const kinds = new Set<ListChange>([...state.announced, ...(before === undefined ? [] : changedKinds(before, snapshot))])
    state.announced.clear()
    const templateKinds = template && templateBefore !== undefined ? changedKinds(templateBefore, snapshot) : []
    if (templateKinds.length > 0) this.#onChange({ upstream, session, kinds: [...new Set([...kinds, ...templateKinds])], template: true })
    else if (kinds.size > 0) this.#onChange({ upstream, session, kinds: [...kinds], template: false })
    if (template && session.listKey === upstream.listKeyOf(GATEWAY_CLIENT)) this.base()
    return snapshot
  }

  #cached (parts: readonly ViewPart[]): CatalogView {
    const key = parts.map((p) => `${p.upstream.name}:${(p.snapshot as Snapshot).id}`).join('|')
    let view = this.#views.get(key)
    if (view === undefined) {
      view = this.#build(parts)
      if (view.collisions.length > 0 && this.#warm) this.#log.error({ collisions: view.collisions }, 'name collisions in a client\'s view of the upstreams: the later upstream\'s entries stay hidden')
      if (this.#views.size >= VIEW_CACHE_LIMIT) this.#views.delete(this.#views.keys().next().value!)
      this.#views.set(key, view)
    }
    return view
  }

  #build (parts: readonly ViewPart[]): CatalogView {
    return new CatalogView(parts, this.#upstreams, (name) => this.#templates.any(name), this.#removed)
  }
}
