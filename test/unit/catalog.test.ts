// The catalog and its sync, as the gateway wires them (Catalog changes go to catalogSync, which tells clients):
// how the lists of several upstreams merge into one namespace (prefixes, collisions), and what a client is told
// when an upstream's lists change. The upstreams' sessions are faked: each lists what the test sets.
import { describe, expect, it } from 'vitest'
import { FULL_ACCESS } from '../../src/auth/access.ts'
import { Catalog } from '../../src/catalog/catalog.ts'
import { catalogSync } from '../../src/catalog/catalog-sync.ts'
import { ResourceSubscriptions } from '../../src/catalog/resource-subscriptions.ts'
import { GatewayError } from '../../src/errors.ts'
import { sessionClient, type ClientRef } from '../../src/upstream/client-ref.ts'
import type { Upstream } from '../../src/upstream/upstream.ts'
import type { UpstreamSession } from '../../src/upstream/upstream-session.ts'
import type { JsonObject } from '../../src/wire/jsonrpc.ts'
import { heartConfig, silent } from '../helpers/heart.ts'

/** An upstream session listing `tools`; while `gate` is set, a read waits for it (the lists are taken as the read begins). */
class ListingSession {
  tools: JsonObject[]
  readonly reads: string[] = []
  gate: Promise<void> | undefined
  pristine = true
  readonly client = { getServerCapabilities: () => ({ tools: {} }) }

  constructor (readonly key: string, readonly listKey: string, tools: JsonObject[]) {
    this.tools = tools
  }

  async request (method: string): Promise<JsonObject> {
    this.reads.push(method)
    const tools = this.tools
    await this.gate
    return { tools }
  }
}

interface FakeUpstream {
  upstream: Upstream
  gateway: ListingSession
  /** The sessions of clients, by client key. */
  clients: Map<string, ListingSession>
}

function upstreamOf (name: string, tools: JsonObject[], settings: JsonObject = {}): FakeUpstream {
  const config = heartConfig({ name, ...settings }).upstreams[0]!
  const gateway = new ListingSession(`gateway:${name}`, '{}', tools)
  const clients = new Map<string, ListingSession>()
  const upstream = {
    name,
    config,
    state: 'ready',
    firstAttempt: Promise.resolve(),
    forwardsAuthorization: false,
    listKeyOf: (client: ClientRef) => client.signature,
    gatewaySession: () => gateway,
    sessionOf: (client: ClientRef) => clients.get(client.key),
    get clientSessions () { return clients.values() },
  } as unknown as Upstream
  return { upstream, gateway, clients }
}

const tool = (name: string, extra: JsonObject = {}): JsonObject => ({ name, inputSchema: { type: 'object' }, ...extra })

/** What clients were told: `everywhere <method>` for every client of every process, `<client> <method>` for one. */
interface Told { said: string[], next: () => Promise<string> }

async function catalogOf (...fakes: FakeUpstream[]): Promise<{ catalog: Catalog, told: Told }> {
  const said: string[] = []
  const waiters: Array<(line: string) => void> = []
  const say = (line: string): void => {
    said.push(line)
    waiters.shift()?.(line)
  }
  const sync = catalogSync({
    catalog: () => catalog,
    subscriptions: new ResourceSubscriptions(silent, () => {}),
    log: silent,
    broadcast: (message, everywhere) => say(`${everywhere ? 'everywhere' : 'here'} ${message.method}`),
    notifyClient: (clientKey, message) => say(`${clientKey} ${message.method}`),
    askClient: async () => { throw new GatewayError('GW_ERR_INTERNAL', ['not asked here']) },
  })
  const upstreams = fakes.map((f) => f.upstream)
  const catalog = new Catalog(upstreams, silent, (change) => sync.changed(change))
  for (const upstream of upstreams) await catalog.upstreamReady(upstream)
  await catalog.start()
  sync.started()
  return { catalog, told: { said, next: async () => await new Promise((resolve) => waiters.push(resolve)) } }
}

const names = (entries: readonly JsonObject[]): unknown[] => entries.map((e) => e.name)

const TOOLS_CHANGED = 'notifications/tools/list_changed'

describe('the catalog', () => {
  it('prefixes each upstream\'s tools with its name: the same tool on two upstreams is two tools', async () => {
    const alpha = upstreamOf('alpha', [tool('search'), tool('build', { execution: { taskSupport: 'required' } })])
    const beta = upstreamOf('beta', [tool('search')], { prefix: 'b' })
    const { catalog } = await catalogOf(alpha, beta)
    const view = catalog.base()
    expect(names(view.list('tools', FULL_ACCESS))).toEqual(['alpha__search', 'alpha__build', 'b__search'])
    expect(view.collisions).toEqual([])
    expect(view.tool('b__search', FULL_ACCESS)).toMatchObject({ upstream: beta.upstream, target: 'search' })
    // The upstream's own task support is kept for the call; the gateway advertises its own policy.
    expect(catalog.nativeTaskSupport('alpha', 'build')).toBe('required')
    expect(view.tool('alpha__build', FULL_ACCESS)).toMatchObject({ taskSupport: 'optional', nativeTaskSupport: 'required' })
  })

  it('keeps a name for the first upstream in configuration order when prefixes collide, and reports the collision', async () => {
    const alpha = upstreamOf('alpha', [tool('search'), tool('fetch')], { prefix: '' })
    const beta = upstreamOf('beta', [tool('search')], { prefix: '' })
    const { catalog } = await catalogOf(alpha, beta)
    const view = catalog.base()
    expect(names(view.list('tools', FULL_ACCESS))).toEqual(['search', 'fetch'])
    expect(view.tool('search', FULL_ACCESS).upstream).toBe(alpha.upstream)
    expect(view.collisions).toEqual([{ kind: 'tools', name: 'search', first: 'alpha', second: 'beta' }])
  })

  it('reads the lists again when an upstream says they changed, and tells every client once', async () => {
    const alpha = upstreamOf('alpha', [tool('search')])
    const { catalog, told } = await catalogOf(alpha)
    alpha.gateway.tools = [tool('search'), tool('fetch')]
    const said = told.next()
    catalog.listChanged(alpha.upstream, alpha.gateway as unknown as UpstreamSession, 'tools')
    expect(await said).toBe(`everywhere ${TOOLS_CHANGED}`)
    expect(names(catalog.base().list('tools', FULL_ACCESS))).toEqual(['alpha__search', 'alpha__fetch'])
    expect(told.said).toEqual([`everywhere ${TOOLS_CHANGED}`])
  })

  it('tells only its client of a change of its own session, even one that lists the same, and shows it only that client', async () => {
    const alpha = upstreamOf('alpha', [tool('search')])
    const { catalog, told } = await catalogOf(alpha)
    const client = sessionClient('s1', 'alice', { elicitation: {} })
    const own = new ListingSession('session:s1', client.signature, [tool('search')])
    own.pristine = false
    alpha.clients.set(client.key, own)
    expect(names((await catalog.view(client)).list('tools', FULL_ACCESS))).toEqual(['alpha__search'])

    own.tools = [tool('search'), tool('mine')]
    let said = told.next()
    catalog.listChanged(alpha.upstream, own as unknown as UpstreamSession, 'tools')
    expect(await said).toBe(`session:s1 ${TOOLS_CHANGED}`)
    expect(names((await catalog.view(client)).list('tools', FULL_ACCESS))).toEqual(['alpha__search', 'alpha__mine'])
    expect(names(catalog.base().list('tools', FULL_ACCESS))).toEqual(['alpha__search'])
    // The upstream said its list changed: its client hears so, as it would without the gateway.
    said = told.next()
    catalog.listChanged(alpha.upstream, own as unknown as UpstreamSession, 'tools')
    expect(await said).toBe(`session:s1 ${TOOLS_CHANGED}`)
    expect(told.said).toEqual([`session:s1 ${TOOLS_CHANGED}`, `session:s1 ${TOOLS_CHANGED}`])
  })

  it('reads again a list that changed while it was read, before telling anyone', async () => {
    const alpha = upstreamOf('alpha', [tool('search')])
    const { catalog, told } = await catalogOf(alpha)
    let open!: () => void
    alpha.gateway.gate = new Promise((resolve) => { open = resolve })
    alpha.gateway.tools = [tool('search'), tool('fetch')]
    const reads = alpha.gateway.reads.length
    const said = told.next()
    catalog.listChanged(alpha.upstream, alpha.gateway as unknown as UpstreamSession, 'tools')
    alpha.gateway.tools = [tool('search'), tool('fetch'), tool('late')]
    catalog.listChanged(alpha.upstream, alpha.gateway as unknown as UpstreamSession, 'tools')
    open()
    expect(await said).toBe(`everywhere ${TOOLS_CHANGED}`)
    expect(alpha.gateway.reads.length - reads).toBe(2)
    expect(names(catalog.base().list('tools', FULL_ACCESS))).toEqual(['alpha__search', 'alpha__fetch', 'alpha__late'])
    expect(told.said).toEqual([`everywhere ${TOOLS_CHANGED}`])
  })

  it('finds an upstream by name as the configuration in force has it, before and after a reload replaces the list', async () => {
    const alpha = upstreamOf('alpha', [tool('search')])
    const beta = upstreamOf('beta', [tool('build')])
    const upstreams = [alpha.upstream, beta.upstream]
    const catalog = new Catalog(upstreams, silent, () => {})
    expect(catalog.upstream('beta')).toBe(beta.upstream)
    // A reload changes the list in place: beta removed, alpha replaced by a new one of the same name, gamma added.
    const alphaAgain = upstreamOf('alpha', [tool('search')])
    const gamma = upstreamOf('gamma', [tool('fetch')])
    upstreams.splice(0, upstreams.length, alphaAgain.upstream, gamma.upstream)
    catalog.upstreamsChanged([beta.upstream])
    expect([catalog.upstream('alpha'), catalog.upstream('beta'), catalog.upstream('gamma')]).toEqual([alphaAgain.upstream, undefined, gamma.upstream])
    expect(catalog.upstream('alpha')).not.toBe(alpha.upstream)
  })
})
