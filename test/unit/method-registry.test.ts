// The method registry of each protocol revision: it declares every method the revision defines (as the SDKs'
// request schemas list them), which of them run on the client's home process (and home routing forwards exactly
// those), which belong to an optional capability, and which carry caching hints; a method it does not declare
// is -32601 with the message it always had.
import { ClientRequestSchema as CoreClientRequestSchema } from '@modelcontextprotocol/core'
import { CancelTaskRequestV2Schema, GetTaskRequestV2Schema, UpdateTaskRequestV2Schema } from '@modelcontextprotocol/ext-tasks/core/v2'
import { ClientRequestSchema as V1ClientRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import { afterEach, describe, expect, it } from 'vitest'
import type { Access } from '../../src/auth/access.ts'
import type { ServerFeatures } from '../../src/catalog/server-profile.ts'
import { ClientHomes } from '../../src/cluster/client-homes.ts'
import { HomeRouting } from '../../src/cluster/home-routing.ts'
import { PeerRequests } from '../../src/cluster/peer-requests.ts'
import type { Handler, MethodTable, RequestContext } from '../../src/dispatch/context.ts'
import { homeMethods, methodTable, type MethodRegistry } from '../../src/dispatch/method-registry.ts'
import { lookupHandler } from '../../src/dispatch/method-table.ts'
import { GatewayError } from '../../src/errors.ts'
import { legacyMethods, type LegacyMethodDeps } from '../../src/protocol/2025-11-25/methods.ts'
import { modernMethods, type ModernMethodDeps } from '../../src/protocol/2026-07-28/methods.ts'
import { MemoryStore } from '../../src/store/memory/memory-store.ts'
import { sessionClient } from '../../src/upstream/client-ref.ts'
import type { JsonObject } from '../../src/wire/jsonrpc.ts'
import { silent } from '../helpers/heart.ts'

type RequestSchema = { shape: { method: { value: unknown } } }

function methodsOf (schemas: readonly RequestSchema[]): string[] {
  return schemas.map((schema) => String(schema.shape.method.value))
}

const V1_REQUESTS = methodsOf(V1ClientRequestSchema.options)
const CORE_REQUESTS = methodsOf(CoreClientRequestSchema.options)
const EXTENSION_REQUESTS = methodsOf([GetTaskRequestV2Schema, UpdateTaskRequestV2Schema, CancelTaskRequestV2Schema])
/** The 2025-era requests the 2026-07-28 revision no longer has (`subscriptions/listen` replaces the subscriptions). */
const DROPPED_IN_2026 = ['initialize', 'ping', 'logging/setLevel', 'resources/subscribe', 'resources/unsubscribe']

/** The methods home routing forwarded before the registries declared them (a list kept by hand in home-routing.ts). */
const HOME_BEFORE = [
  'tools/call', 'tools/list', 'prompts/get', 'prompts/list', 'resources/read', 'resources/list',
  'resources/templates/list', 'resources/subscribe', 'resources/unsubscribe', 'completion/complete',
  'subscriptions/listen',
]

/** A handler that only says which method ran, and where. */
function stub (method: string, where: string): Handler {
  return async () => ({ method, servedBy: where })
}

/** Stub handlers of any method, as the shared handlers a registry picks from. */
function stubHandlers (where: string): Record<string, Handler> {
  return new Proxy({}, { get: (_target, method) => stub(String(method), where) })
}

/** The registries with deps nothing is asked of: building a registry only declares. */
function registries (): { legacy: MethodRegistry, modern: MethodRegistry } {
  const shared = stubHandlers('here')
  return {
    legacy: legacyMethods({ shared } as unknown as LegacyMethodDeps),
    modern: modernMethods({ shared, toolsCall: shared['tools/call'], promptsGet: shared['prompts/get'], listTtlMs: 60_000 } as unknown as ModernMethodDeps),
  }
}

const LEASE_MS = 60_000

const sorted = (methods: Iterable<string>): string[] => [...methods].sort()

const EVERYTHING: ServerFeatures = {
  tools: { listChanged: true },
  prompts: { listChanged: true },
  resources: { subscribe: true, listChanged: true },
  completions: {},
  logging: {},
}
const NOTHING: ServerFeatures = { tools: { listChanged: true } }

function context (overrides: Partial<RequestContext> = {}): RequestContext {
  return {
    client: sessionClient('s1', 'alice', {}),
    clientCapabilities: {},
    sessionId: 's1',
    caller: { principal: 'alice', access: { key: 'all', all: true } as unknown as Access, authorization: undefined },
    requestId: 1,
    signal: new AbortController().signal,
    progressToken: undefined,
    log: silent,
    disconnected: new AbortController().signal,
    openStream: () => {},
    send: () => {},
    notify: () => {},
    request: async () => ({}),
    ...overrides,
  }
}

describe('the method registries', () => {
  it('declare every request of 2025-11-25 but initialize, which the endpoint answers as it opens the session', () => {
    expect(V1_REQUESTS).toContain('tasks/result')
    expect(sorted(Object.keys(registries().legacy.methods))).toEqual(sorted(V1_REQUESTS.filter((method) => method !== 'initialize')))
  })

  it('declare every request of 2026-07-28 and of its tasks extension, and none of the 2025-era ones it dropped', () => {
    expect(CORE_REQUESTS).toContain('subscriptions/listen')
    const defined = [...CORE_REQUESTS.filter((method) => !DROPPED_IN_2026.includes(method)), ...EXTENSION_REQUESTS]
    expect(sorted(Object.keys(registries().modern.methods))).toEqual(sorted(defined))
  })

  it('route home exactly the methods home routing forwarded before, of each revision', () => {
    for (const registry of Object.values(registries())) {
      expect(sorted(homeMethods(registry))).toEqual(sorted(HOME_BEFORE.filter((method) => method in registry.methods)))
    }
  })

  it('declare the capabilities and the list caching the tables were assembled with', () => {
    const { legacy, modern } = registries()
    const capabilities = (registry: MethodRegistry): Record<string, string> => Object.fromEntries(
      Object.entries(registry.methods).flatMap(([method, spec]) => spec.capability === undefined ? [] : [[method, spec.capability]]))
    const resources = { 'resources/list': 'resources', 'resources/templates/list': 'resources', 'resources/read': 'resources' }
    const common = { 'prompts/list': 'prompts', 'prompts/get': 'prompts', ...resources, 'completion/complete': 'completions' }
    const subscriptions = { 'resources/subscribe': 'subscriptions', 'resources/unsubscribe': 'subscriptions' }
    expect(capabilities(legacy)).toEqual({ ...common, ...subscriptions, 'logging/setLevel': 'logging' })
    expect(capabilities(modern)).toEqual(common)
    const cached = (registry: MethodRegistry): string[] =>
      sorted(Object.entries(registry.methods).filter(([, spec]) => spec.listCache === true).map(([method]) => method))
    expect(cached(legacy)).toEqual([])
    expect(cached(modern)).toEqual(sorted(['tools/list', 'prompts/list', 'resources/list', 'resources/templates/list', 'resources/read']))
  })
})

describe('a table made from a registry', () => {
  it('answers a method it does not declare with -32601 and the message it always had', () => {
    const table = methodTable(registries().legacy, async () => EVERYTHING)
    let refused: unknown
    try {
      lookupHandler(table, 'tools/frobnicate')
    } catch (err) {
      refused = err
    }
    expect(refused).toBeInstanceOf(GatewayError)
    expect(refused).toMatchObject({ code: 'GW_ERR_RPC_METHOD_NOT_FOUND', rpcCode: -32601, message: 'Method not found: tools/frobnicate' })
    expect(lookupHandler(methodTable(registries().modern, async () => EVERYTHING), 'tools/list')).toBeTypeOf('function')
    expect(() => lookupHandler(methodTable(registries().modern, async () => EVERYTHING), 'ping')).toThrow('Method not found: ping')
  })

  it('refuses a method of a capability no upstream offers with -32601, and answers it once one does', async () => {
    let features = NOTHING
    const table = methodTable(registries().legacy, async () => features)
    await expect(lookupHandler(table, 'prompts/list')({}, context())).rejects.toMatchObject({ rpcCode: -32601, message: 'Method not found: prompts/list' })
    await expect(lookupHandler(table, 'resources/subscribe')({}, context())).rejects.toMatchObject({ rpcCode: -32601 })
    expect(await lookupHandler(table, 'tools/list')({}, context())).toEqual({ method: 'tools/list', servedBy: 'here' })
    features = EVERYTHING
    expect(await lookupHandler(table, 'prompts/list')({}, context())).toEqual({ method: 'prompts/list', servedBy: 'here' })
  })

  it('adds the revision\'s caching hints to the lists, private to a caller whose grants are narrowed', async () => {
    const table = methodTable(registries().modern, async () => EVERYTHING)
    const narrowed = context({ caller: { principal: 'alice', access: { key: 'x', all: false } as unknown as Access, authorization: undefined } })
    expect(await lookupHandler(table, 'tools/list')({}, narrowed)).toEqual({ method: 'tools/list', servedBy: 'here', ttlMs: 60_000, cacheScope: 'private' })
    expect(await lookupHandler(table, 'tools/call')({}, narrowed)).toEqual({ method: 'tools/call', servedBy: 'here' })
  })
})

describe('home routing of a registry', () => {
  const closers: Array<() => Promise<void>> = []
  afterEach(async () => {
    for (const close of closers.splice(0)) await close()
  })

  /** One gateway process on the shared store, serving `registry` with handlers that say where they ran. */
  async function gatewayProcess (store: MemoryStore, id: string, name: string, registry: MethodRegistry): Promise<MethodTable> {
    await store.leases.renew(id, Date.now() + LEASE_MS)
    const holdsSessions = (): boolean => false
    const homes = new ClientHomes({ processId: id, homes: store.homes, shared: true, ttlMs: LEASE_MS, holdsSessions, log: silent })
    const peers = new PeerRequests(id, store.bus, store.leases)
    closers.push(async () => {
      peers.close()
      await homes.close()
    })
    const routing = new HomeRouting({ homes, peers, access: (key) => ({ key, all: true }) as unknown as Access, log: silent })
    const methods = Object.fromEntries(Object.entries(registry.methods)
      .map(([method, spec]) => [method, { ...spec, handler: stub(method, id) }]))
    const declared: MethodRegistry = { ...registry, cacheHints: undefined, methods }
    return routing.route(name, methodTable(declared, async () => EVERYTHING), homeMethods(registry))
  }

  it('forwards to the client\'s home exactly the methods its revision declares home, and serves the others where they arrive', async () => {
    for (const [name, registry] of Object.entries(registries())) {
      const store = new MemoryStore()
      const a = await gatewayProcess(store, 'a', name, registry)
      const b = await gatewayProcess(store, 'b', name, registry)
      // The client's first request reached a: a is its home.
      await lookupHandler(a, 'tools/call')({}, context())
      const servedBy: Record<string, JsonObject> = {}
      for (const method of Object.keys(registry.methods)) servedBy[method] = await lookupHandler(b, method)({}, context())
      const forwarded = Object.entries(servedBy).filter(([, result]) => result.servedBy === 'a').map(([method]) => method)
      expect(sorted(forwarded), name).toEqual(sorted(homeMethods(registry)))
    }
  })
})
