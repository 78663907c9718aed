import { encodeHeaderValue } from '../../src/wire/mcp-name.ts'

/**
 * Generates malformed and mutated requests for the gateway's MCP endpoint, each with the answer it must get.
 * Case `i` of a seed is always the same request shape (its own PRNG stream), whatever order a run sends it in.
 */

type Json = Record<string, unknown>
export type RequestId = string | number
/** A JSON-RPC error code, a success response, or no body (202, HEAD). */
export type Outcome = number | 'result' | 'empty'

/** The answer a case must get: one of `status`, one of `outcomes`, and the JSON-RPC `id` it must carry. */
export interface Expectation { status: readonly number[], outcomes: readonly Outcome[], id: RequestId | null }

export interface FuzzCase {
  kind: string
  method: 'POST' | 'GET' | 'DELETE' | 'PUT' | 'PATCH' | 'HEAD' | 'OPTIONS'
  headers: Record<string, string>
  body?: string | Buffer
  chunked?: boolean // sent with chunked transfer encoding (no Content-Length)
  expect: Expectation
  touchesLive?: boolean // aimed at live state of alice: a pending input, the held call, a running task
}

type Who = 'alice' | 'bob'

/**
 * What requests aim at: real sessions, alice's tasks (ended with a result, or live), the pending input of her legacy and of
 * her modern task (each attacked by its own dialect's malformed answers, so a change tells which), stale input keys, her requestState.
 */
export interface FuzzTargets {
  maxBodyBytes: number
  tokens: Record<Who, string>
  sessions: Record<Who, string>
  taskIds: string[]
  completedIds: string[]
  liveIds: string[]
  inputs: Record<'legacy' | 'modern', { taskId: string, key: string }>
  staleKeys: string[]
  requestState: string
}

/** mulberry32: small, fast, and good enough to pick among mutations. */
export class Rng {
  #state: number
  constructor (seed: number) { this.#state = seed >>> 0 }
  next (): number {
    const t = Math.imul((this.#state = (this.#state + 0x6d2b79f5) >>> 0) ^ (this.#state >>> 15), this.#state | 1)
    const u = t ^ (t + Math.imul(t ^ (t >>> 7), t | 61))
    return ((u ^ (u >>> 14)) >>> 0) / 4_294_967_296
  }

  int (n: number): number { return Math.floor(this.next() * n) }
  pick<T> (items: readonly T[]): T { return items[this.int(items.length)]! }
  chance (p: number): boolean { return this.next() < p }
  text (length: number, alphabet = ID_CHARS): string { return Array.from({ length }, () => alphabet[this.int(alphabet.length)]).join('') }
}

const ID_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
const JSONRPC = '2.0'
const VERSION = 'io.modelcontextprotocol/protocolVersion'
const CAPS = 'io.modelcontextprotocol/clientCapabilities'
const MODERN = '2026-07-28'
const PLAIN_CAPS = { elicitation: { form: {} } }
const TASK_CAPS = { elicitation: { form: {} }, extensions: { 'io.modelcontextprotocol/tasks': {} } }
const WRONG_TYPES: unknown[] = [42, -1, 1.5, true, false, null, [], ['x'], {}, { a: 1 }]
const POISON = ['"__proto__":{"polluted":true}', '"\\u005f_proto__":{"polluted":true}', '"__pro\\u0074o__":1', '"constructor":{"prototype":{"polluted":true}}', '"\\u0063onstructor":{"prototype":1}']
const HARMLESS = ['"constructor":"x"', '"constructor":{"name":"x"}', '"prototype":{"polluted":true}', '"toString":1', '"hasOwnProperty":"x"', '"valueOf":{}', '"then":1']
const UNKNOWN_METHODS = ['tools/frobnicate', '__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', 'tasks/', '', ' ping', 'PING', 'tasks/get/', 'rpc.discover', 'notifications/initialized', 'server/discover', 'subscriptions/listen', 'tasks/update', 'elicitation/create', 'résumé/ü', '\ud800']

const expect = (status: number, outcome: Outcome, id: RequestId | null = null): Expectation =>
  ({ status: [status], outcomes: [outcome], id })
const ACCEPTED = expect(202, 'empty')

/** `depth` nested arrays or objects, written as text (JSON.stringify itself overflows the stack on them). */
export function nested (depth: number, objects = false): string {
  return objects ? `${'{"a":'.repeat(depth)}0${'}'.repeat(depth)}` : `${'['.repeat(depth)}${']'.repeat(depth)}`
}

/** One generated case: its PRNG, what it may aim at, and builders for well-formed parts to mutate. */
export class Gen {
  readonly rng: Rng
  readonly t: FuzzTargets
  readonly #index: number

  constructor (rng: Rng, targets: FuzzTargets, index: number) { this.rng = rng; this.t = targets; this.#index = index }

  /** Unique per case (a notifications/cancelled never names another case's request), in varied types. */
  id (): RequestId { const n = this.#index + 1; return this.rng.pick<RequestId>([n, -n, n * 1_000_003, `f-${n}`, `ü✓-${n}`, `${n}`]) }

  who (): Who { return this.rng.chance(0.7) ? 'alice' : 'bob' }
  auth (who: Who): Record<string, string> { return { authorization: `Bearer ${this.t.tokens[who]}` } }
  request (method: string, params?: unknown): Json {
    return { jsonrpc: JSONRPC, id: this.id(), method, ...(params !== undefined && { params }) }
  }

  aliceTask (): string { return this.rng.pick(this.t.taskIds) }
  input (): { taskId: string, key: string } { return this.rng.pick([this.t.inputs.legacy, this.t.inputs.modern]) }

  /** A different string of the same kind: one character replaced. */
  mutate (value: string): string {
    const at = this.rng.int(value.length)
    const alphabet = ID_CHARS.replace(value[at] ?? '', '')
    return `${value.slice(0, at)}${this.rng.pick([...alphabet])}${value.slice(at + 1)}`
  }

  forgedTaskId (): string {
    const real = this.aliceTask()
    return this.rng.pick([
      () => this.rng.text(22), () => this.mutate(real), () => `${real}x`, () => `x${real}`, () => real.slice(1), () => ' ',
      () => "' OR '1'='1", () => '%', () => '*', () => '../../etc/passwd', () => 'null', () => '0', () => '\u0000', () => 'ü✓', () => '__proto__', () => 'constructor', () => '',
    ])()
  }

  /** A POST with the legacy headers and the session of `who`. */
  legacy (kind: string, who: Who, body: unknown, expectation: Expectation, extra: Record<string, string | undefined> = {}): FuzzCase {
    const headers: Record<string, string | undefined> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...this.auth(who), 'mcp-session-id': this.t.sessions[who], ...extra }
    return { kind, method: 'POST', headers: defined(headers), body: typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body), expect: expectation }
  }

  /** A 2026-07-28 request of `who` with its envelope and matching routing headers, before any mutation. */
  modern (method: string, params: Json, who: Who = 'alice', caps: Json = TASK_CAPS): { message: Json, headers: Record<string, string> } {
    const message = this.request(method, { ...params, _meta: { [VERSION]: MODERN, [CAPS]: caps, 'io.modelcontextprotocol/clientInfo': { name: 'fuzz', version: '1' } } })
    const field = ({ 'tools/call': 'name', 'tasks/get': 'taskId', 'tasks/update': 'taskId', 'tasks/cancel': 'taskId' } as Record<string, string>)[method]
    const name = field === undefined ? undefined : params[field]
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...this.auth(who), 'mcp-protocol-version': MODERN, 'mcp-method': method, ...(typeof name === 'string' && { 'mcp-name': encodeHeaderValue(name) }) }
    return { message, headers }
  }

  /** A legacy request that must be answered in a 200 with one of `outcomes`. */
  rpc (kind: string, who: Who, method: string, params: unknown, ...outcomes: Outcome[]): FuzzCase {
    const message = this.request(method, params)
    return this.legacy(kind, who, message, { status: [200], outcomes, id: message.id as RequestId })
  }

  /** A 2026-07-28 request that must be answered in a 200 with one of `outcomes` (unless `status` says otherwise). */
  modernCase (kind: string, method: string, params: Json, outcomes: Outcome[], who: Who = 'alice', caps: Json = TASK_CAPS, status = 200): FuzzCase {
    const { message, headers } = this.modern(method, params, who, caps)
    return { kind, method: 'POST', headers, body: JSON.stringify(message), expect: { status: [status], outcomes, id: message.id as RequestId } }
  }

  /** A JSON request of `size` bytes: `build(pad)` with the pad grown to fit. */
  sized (size: number, build: (pad: string) => unknown): string { return JSON.stringify(build(this.rng.pick(['x', 'y', 'z']).repeat(Math.max(0, size - JSON.stringify(build('')).length)))) }
}

const defined = (headers: Record<string, string | undefined>): Record<string, string> =>
  Object.fromEntries(Object.entries(headers).filter((e): e is [string, string] => e[1] !== undefined))

type Generator = (g: Gen) => FuzzCase
const live = (c: FuzzCase): FuzzCase => ({ ...c, touchesLive: true })

const badJson: Generator = (g) => {
  const valid = JSON.stringify(g.request('tasks/get', { taskId: g.forgedTaskId() }))
  const body = g.rng.pick<() => string | Buffer>([
    () => valid.slice(0, g.rng.int(valid.length)), () => valid.replace(':', g.rng.pick([';', '', '::'])), () => valid.replace(/"/g, "'"),
    () => `${valid.slice(0, -1)},}`, () => `${valid}/* comment */`, () => `${valid}${valid}`, () => `[${valid}`, () => ' \t\n',
    () => valid.replace('"2.0"', g.rng.pick(['NaN', 'Infinity', 'undefined', '2.0.0', "'2.0'", '0x2'])), () => `{${g.rng.text(1 + g.rng.int(60), '{}[]":,ab01 \\')}`,
    () => Buffer.concat([Buffer.from('{"jsonrpc":'), Buffer.from([0xff, 0xfe, 0xc0]), Buffer.from('}')]),
  ])()
  const parses = (text: string): boolean => { try { JSON.parse(text); return true } catch { return false } }
  return g.legacy('bad-json', 'alice', typeof body === 'string' && parses(body) ? `${body},` : body, expect(400, -32700))
}

const notRpc: Generator = (g) => g.rng.chance(0.5)
  ? g.legacy('not-an-object', g.who(), g.rng.pick(['null', '42', '-1e999', '"ping"', 'true', '{}', '{"id":1}']), expect(400, -32600))
  : g.legacy('batch', g.who(), g.rng.chance(0.3) ? nested(g.rng.pick([1000, 10_000, 50_000])) : JSON.stringify(Array.from({ length: g.rng.int(4) }, () => g.request('ping'))), expect(400, -32600))

const badMessage: Generator = (g) => {
  const message = g.request(g.rng.pick(['ping', 'tasks/get', 'tools/call', 'initialize', 'tasks/list']), {})
  const field = g.rng.pick(['jsonrpc', 'id', 'method', 'params'])
  const value = g.rng.pick<unknown>({ jsonrpc: [undefined, '1.0', 2, '2.00', null, ' 2.0', {}, ['2.0']], id: [null, 1.5, true, {}, [], [1], -0.5, 1e-7], method: [undefined, 42, null, {}, [], true], params: [[], 'x', 1, true, null, ['a']] }[field]!)
  if (value === undefined) delete message[field]
  else message[field] = value
  // The error still answers the request's id when the request has a string method and a valid id.
  return g.legacy(`bad-${field}`, g.who(), message, expect(400, -32600, field === 'id' || field === 'method' ? null : message.id as RequestId))
}

const unknownMethod: Generator = (g) => {
  const method = g.rng.pick([...UNKNOWN_METHODS, `x-${g.rng.text(1 + g.rng.int(30))}`, `x-${'m'.repeat(1000 + g.rng.int(5000))}`])
  if (g.rng.chance(0.2)) return g.legacy('unknown-notification', g.who(), { jsonrpc: JSONRPC, method, params: { x: 1 } }, ACCEPTED)
  return g.rpc('unknown-method', g.who(), method, { x: 1 }, -32601)
}

const session: Generator = (g) => {
  const who = g.who()
  const wrong = g.rng.pick([() => g.rng.text(36, '0123456789abcdef-'), () => g.rng.text(1 + g.rng.int(200)), () => g.mutate(g.t.sessions.alice), () => g.t.sessions.alice.toUpperCase(), () => g.t.sessions[who === 'alice' ? 'bob' : 'alice'], () => '__proto__'])()
  const message = g.rng.pick([g.request('ping'), g.request('tasks/get', { taskId: g.aliceTask() }), g.request('tasks/cancel', { taskId: g.rng.pick(g.t.liveIds) })])
  const variant = g.rng.int(6)
  if (variant === 0) return live(g.legacy('session-missing', who, message, expect(400, -32600, message.id as RequestId), { 'mcp-session-id': undefined }))
  if (variant === 1) return live(g.legacy('session-missing', who, { jsonrpc: JSONRPC, id: g.input().key, result: { action: 'decline' } }, expect(400, -32600), { 'mcp-session-id': undefined }))
  const method = g.rng.pick(['GET', 'DELETE', 'HEAD'] as const)
  // HEAD is no method of the endpoint (405, before any session check).
  if (variant === 2) return live({ kind: `session-wrong-${method}`, method, headers: { ...g.auth(who), accept: 'text/event-stream', 'mcp-session-id': wrong }, expect: method === 'HEAD' ? expect(405, 'empty') : expect(404, -32001) })
  return live(g.legacy('session-wrong', who, message, expect(404, -32001, message.id as RequestId), { 'mcp-session-id': wrong }))
}

const auth: Generator = (g) => {
  const a = g.t.tokens.alice
  const header = g.rng.pick([undefined, '', 'Bearer', 'Basic YWxpY2U6YWxpY2U=', 'Bearer wrong-token', `Bearer ${a}x`, `Bearer ${a.toUpperCase()}`, `Token ${a}`, `Bearer ${a} ${a}`, `Bearer ${'x'.repeat(4000)}`, 'Bearer __proto__', `Bearer ${g.t.tokens.bob.slice(1)}`])
  if (g.rng.chance(0.2)) {
    const method = g.rng.pick(['GET', 'DELETE'] as const)
    return live({ kind: `auth-${method}`, method, headers: defined({ authorization: header, accept: 'text/event-stream', 'mcp-session-id': g.t.sessions.alice }), expect: expect(401, -32001) })
  }
  const message = g.rng.pick([g.request('ping'), g.request('tasks/cancel', { taskId: g.rng.pick(g.t.liveIds) }), g.request('tasks/list')])
  return live(g.legacy('auth', 'alice', message, expect(401, -32001, message.id as RequestId), { authorization: header }))
}

const headers: Generator = (g) => {
  const message = g.request(g.rng.pick(['ping', 'tasks/list', 'tools/list']))
  const id = message.id as RequestId
  switch (g.rng.int(6)) {
    case 0: return g.legacy('content-type', 'alice', message, expect(415, -32600), { 'content-type': g.rng.pick([undefined, 'text/plain', 'application/xml', 'text/html', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/octet-stream', 'application/jsonx', 'text/json']) })
    case 1: return g.legacy('accept', 'alice', message, expect(406, -32600, id), { accept: g.rng.pick(['text/html', 'application/json', 'text/event-stream', 'image/png', 'application/xml']) })
    case 2: return g.legacy('protocol-version', 'alice', message, expect(400, -32600, id), { 'mcp-protocol-version': g.rng.pick(['1999-01-01', 'garbage', '2025-11-26', '2024-11-04', 'latest', '2026-07-29']) })
    case 3: return g.legacy('modern-header-on-legacy', 'alice', message, expect(400, -32602, id), { 'mcp-protocol-version': MODERN })
    case 4: return g.legacy('host', 'alice', message, expect(403, -32600), { host: g.rng.pick(['evil.example', 'evil.example:8080', '127.0.0.1.nip.io', 'localhost.evil.example', '[::2]']) })
    default: return g.legacy('origin', 'alice', message, expect(403, -32600), { origin: g.rng.pick(['https://evil.example', 'null', 'http://127.0.0.1.evil.example', 'file://', 'http://localhost.evil']) })
  }
}

const httpMethod: Generator = (g) => {
  const method = g.rng.pick(['PUT', 'PATCH', 'OPTIONS', 'GET', 'DELETE', 'HEAD', 'HEAD'] as const)
  const base = { ...g.auth('alice'), accept: 'text/event-stream' }
  const noBody = (status: number): Expectation => expect(status, -32600)
  if (method === 'PUT' || method === 'PATCH') return { kind: method, method, headers: { ...base, 'content-type': 'application/json' }, body: JSON.stringify(g.request('ping')), expect: expect(405, -32600) }
  // A plain OPTIONS (no preflight) is told the methods; HEAD (a stream without a body) is no method of the endpoint.
  if (method === 'OPTIONS') return { kind: method, method, headers: base, expect: expect(204, 'empty') }
  if (method === 'HEAD') return { kind: g.rng.chance(0.5) ? 'HEAD-session' : 'HEAD', method, headers: { ...base, ...(g.rng.chance(0.5) && { 'mcp-session-id': g.t.sessions.alice }) }, expect: expect(405, 'empty') }
  if (method !== 'DELETE' && g.rng.chance(0.3)) return { kind: `${method}-accept`, method, headers: { ...base, accept: 'application/json', 'mcp-session-id': g.t.sessions.alice }, expect: noBody(406) }
  return { kind: `${method}-no-session`, method, headers: base, expect: noBody(400) }
}

const bodySize: Generator = (g) => {
  const limit = g.t.maxBodyBytes
  const who = g.who()
  if (g.rng.chance(0.35)) return { ...g.legacy('too-large', who, g.sized(limit + 1 + g.rng.int(64 * 1024), (pad) => g.request('tasks/get', { taskId: pad })), expect(413, -32600)), chunked: g.rng.chance(0.3) }
  const size = limit - 64 - g.rng.int(8192)
  const sized = (kind: string, build: (pad: string) => Json, expectation: Expectation): FuzzCase => {
    const body = g.sized(size, (pad) => ({ jsonrpc: JSONRPC, id: expectation.id, ...build(pad) }))
    return g.legacy(kind, who, body, expectation)
  }
  switch (g.rng.int(6)) {
    case 0: return sized('near-limit-task-id', (pad) => ({ method: 'tasks/get', params: { taskId: pad } }), expect(200, -32602, 7))
    case 1: return sized('near-limit-params', (pad) => ({ method: 'x/nope', params: { pad } }), expect(200, -32601, 'p'))
    case 2: return sized('near-limit-method', (pad) => ({ method: pad }), expect(200, -32601, 3))
    case 3: return sized('near-limit-tool', (pad) => ({ method: 'tools/call', params: { name: pad, arguments: {} } }), expect(200, -32602, 4))
    case 4: return live(sized('near-limit-answer', (pad) => ({ id: g.input().key, result: { action: 'accept', content: { name: pad } }, error: { code: 1, message: 'both' } }), expect(400, -32600)))
    default: {
      const m = g.modern('tools/call', { name: 'demo__ask_user', arguments: {}, requestState: 'PAD' }, 'alice', PLAIN_CAPS)
      const body = g.sized(size, (pad) => ({ ...m.message, id: 5, params: { ...m.message.params as Json, requestState: `${g.t.requestState}${pad}` } }))
      return live({ kind: 'near-limit-request-state', method: 'POST', headers: m.headers, body, expect: expect(200, -32602, 5) })
    }
  }
}

const deep: Generator = (g) => {
  const depth = g.rng.pick([1000, 10_000, 10_000, 50_000])
  const value = nested(depth, depth <= 10_000 && g.rng.chance(0.4))
  const id = g.rng.int(1000)
  const text = (method: string, params: string): string => `{"jsonrpc":"2.0","id":${id},"method":"${method}","params":${params}}`
  // Nesting beyond 100 levels is refused as an invalid message before anything reads or forwards it.
  const refused = expect(400, -32600, id)
  switch (g.rng.int(g.rng.chance(0.25) ? 6 : 4)) {
    case 0: return g.legacy('deep-params', g.who(), text('x/deep', `{"x":${value}}`), refused)
    case 1: return g.legacy('deep-task-id', g.who(), text('tasks/get', `{"taskId":"${g.mutate(g.aliceTask())}","x":${value}}`), refused)
    case 2: return g.legacy('deep-not-rpc', g.who(), nested(Math.min(depth, 10_000), true), expect(400, -32600))
    case 3: {
      const m = g.modern('tools/call', { name: 'demo__ask_user', requestState: g.mutate(g.t.requestState), arguments: { x: 'DEEP' } }, 'alice', PLAIN_CAPS)
      return live({ kind: 'deep-request-state', method: 'POST', headers: m.headers, body: JSON.stringify({ ...m.message, id }).replace('"DEEP"', value), expect: refused })
    }
    case 4: return g.legacy('deep-tool-arguments', g.who(), text('tools/call', `{"name":"demo__echo","arguments":{"text":"deep","x":${value}}}`), refused)
    default: return g.legacy('deep-task-arguments', 'bob', text('tools/call', `{"name":"demo__echo","task":{"ttl":60000},"arguments":{"text":"deep","x":${value}}}`), refused)
  }
}

const protoKeys: Generator = (g) => {
  const [message, outcome] = g.rng.pick<[Json, Outcome]>([[g.request('ping', {}), 'result'], [g.request('x/proto', {}), -32601], [g.request('tasks/get', { taskId: g.forgedTaskId() }), -32602], [g.request('tasks/list', {}), 'result']])
  const poison = g.rng.chance(0.6)
  const params = message.params as Json
  const at = g.rng.pick(['top', 'params', 'meta', 'deep'])
  if (at === 'top') message.FUZZ = 0
  else if (at === 'params') params.FUZZ = 0
  else if (at === 'meta') params._meta = { progressToken: 'p', FUZZ: 0 }
  else params.x = JSON.parse(`${'{"a":'.repeat(50)}{"FUZZ":0}${'}'.repeat(50)}`)
  const body = JSON.stringify(message).replace('"FUZZ":0', g.rng.pick(poison ? POISON : HARMLESS))
  return g.legacy(poison ? 'proto-poison' : 'proto-harmless', g.who(), body, poison ? expect(400, -32700) : expect(200, outcome, message.id as RequestId))
}

const legacyTasks: Generator = (g) => {
  const method = g.rng.pick(['tasks/get', 'tasks/result', 'tasks/cancel'])
  switch (g.rng.int(6)) {
    case 0: case 1: return g.rpc('task-forged', g.who(), method, { taskId: g.forgedTaskId() }, -32602)
    case 2: return live(g.rng.chance(0.7)
      ? g.rpc('task-wrong-types', g.who(), method, { taskId: g.rng.pick([...WRONG_TYPES, undefined]) }, -32602)
      : g.rpc('task-wrong-types', g.who(), 'tasks/list', { cursor: g.rng.pick([1, {}, [], null, true, '!!!', '@@@', 'zzzz', '']) }, -32602))
    case 3: return live(g.rpc('task-of-alice-by-bob', 'bob', method, { taskId: g.aliceTask() }, -32602))
    // Valid reads by the owner: they must answer, and change nothing.
    default: return g.rpc('task-read-by-owner', 'alice', ...g.rng.pick<[string, Json]>([['tasks/get', { taskId: g.aliceTask() }], ['tasks/result', { taskId: g.rng.pick(g.t.completedIds) }], ['tasks/list', g.rng.chance(0.3) ? { cursor: Buffer.from('[0,"zzz"]').toString('base64url') } : {}]]), 'result')
  }
}

const answers: Generator = (g) => {
  const { key } = g.input()
  const malformed = g.rng.pick<Json>([
    { result: 'x' }, { result: 1 }, { result: [] }, { result: [{ action: 'accept' }] }, { result: null }, { error: 'x' }, { error: null }, { error: [] }, { error: {} },
    { error: { code: '1', message: 'x' } }, { error: { code: 1 } }, { error: { code: 1.5, message: 'x' } }, { error: { code: -32000, message: 42 } }, {},
    { result: { action: 'accept', content: { name: 'Both' } }, error: { code: 1, message: 'both' } }, { jsonrpc: '1.0', result: { action: 'decline' } },
  ])
  switch (g.rng.int(4)) {
    case 0: return g.legacy('answer-nobody-asked', g.who(), { jsonrpc: JSONRPC, id: g.rng.pick([g.rng.text(20), g.rng.int(100_000), `in-${g.rng.text(22)}`, ...g.t.staleKeys]), result: { action: 'accept', content: { name: 'Nobody' } } }, expect(400, -32600))
    case 1: return live(g.legacy('answer-by-bob', 'bob', { jsonrpc: JSONRPC, id: key, result: { action: 'accept', content: { name: 'Mallory' } } }, expect(400, -32600)))
    case 2: return live({ ...g.modernCase('answer-to-modern', 'tools/call', {}, [-32600], 'alice', TASK_CAPS, 400), body: JSON.stringify({ jsonrpc: JSONRPC, id: key, result: { action: 'accept' } }), expect: expect(400, -32600) })
    // A JSON-RPC response whose result or error is malformed answers nothing, even with the right id.
    default: return live(g.legacy('answer-malformed', 'alice', { jsonrpc: JSONRPC, id: g.t.inputs.legacy.key, ...malformed }, expect(400, -32600)))
  }
}

type EnvelopeMutation = (m: { message: Json, headers: Record<string, string>, meta: Json }, g: Gen) => Expectation | undefined
const ENVELOPE_MUTATIONS: Array<[string, EnvelopeMutation]> = [
  ['no-version-header', ({ headers }) => { delete headers['mcp-protocol-version']; return expect(400, -32020) }],
  ['other-version-header', ({ headers }) => { headers['mcp-protocol-version'] = '2025-11-25'; return expect(400, -32020) }],
  ['unsupported-version', ({ headers, meta }) => { headers['mcp-protocol-version'] = meta[VERSION] = '2099-01-01'; return expect(400, -32022) }],
  ['version-not-string', ({ meta }, g) => { meta[VERSION] = g.rng.pick([20260728, null, true, {}]); return expect(400, -32602) }],
  ['no-meta', ({ message }, g) => { (message.params as Json)._meta = g.rng.pick([undefined, 'x', [], null, 1]); return expect(400, -32602) }],
  ['no-capabilities', ({ meta }, g) => { meta[CAPS] = g.rng.pick([undefined, 'x', [], null, 1]); return expect(400, -32602) }],
  ['method-header-mismatch', ({ headers }, g) => { headers['mcp-method'] = g.rng.pick(['tools/call', 'tasks/cancel', 'TOOLS/LIST', 'x']); return expect(400, -32020) }],
  ['removed-method', ({ message, headers }, g) => { message.method = headers['mcp-method'] = g.rng.pick(['ping', 'tasks/list', 'tasks/result', 'initialize', 'logging/setLevel', 'resources/subscribe', 'x/y', '__proto__']); return expect(404, -32601) }],
  ['junk-meta', ({ headers, meta }, g) => { Object.assign(meta, { progressToken: {}, 'io.modelcontextprotocol/logLevel': 42, 'io.modelcontextprotocol/clientInfo': 7, 'io.modelcontextprotocol/related-task': { taskId: g.aliceTask() } }); headers['mcp-session-id'] = g.rng.text(36); return undefined }],
  ['notification', ({ message, headers }) => { delete message.id; message.method = headers['mcp-method'] = 'notifications/fuzz'; return ACCEPTED }],
  ['name-header-mismatch', ({ message, headers }, g) => { headers['mcp-name'] = g.mutate(String((message.params as Json).taskId)); return expect(400, -32020) }],
]

const envelope: Generator = (g) => {
  const [method, params, outcome] = g.rng.pick<[string, Json, Outcome]>([['tasks/get', { taskId: g.mutate(g.aliceTask()) }, -32602], ['tools/list', {}, 'result'], ['server/discover', {}, 'result'], ['resources/templates/list', {}, 'result']])
  const who = g.who()
  if (method === 'tasks/get' && g.rng.chance(0.1)) return g.modernCase('envelope-no-tasks-extension', method, params, [-32021], who, PLAIN_CAPS, 400)
  const m = g.modern(method, params, who)
  const [name, mutate] = g.rng.pick(ENVELOPE_MUTATIONS.filter(([n]) => method === 'tasks/get' || n !== 'name-header-mismatch'))
  const expectation = mutate({ ...m, meta: (m.message.params as Json)._meta as Json }, g) ?? expect(200, outcome)
  return { kind: `envelope-${name}`, method: 'POST', headers: m.headers, body: JSON.stringify(m.message), expect: { ...expectation, id: expectation === ACCEPTED ? null : m.message.id as RequestId } }
}

const modernTasks: Generator = (g) => {
  const { taskId, key } = g.t.inputs.modern
  const method = g.rng.pick(['tasks/get', 'tasks/update', 'tasks/cancel'])
  switch (g.rng.int(7)) {
    case 0: return g.modernCase('modern-task-forged', method, { taskId: g.forgedTaskId() }, [-32602], g.who())
    case 1: return g.modernCase('modern-task-wrong-type', method, { taskId: g.rng.pick(WRONG_TYPES) }, [-32602])
    case 2: return live(g.modernCase('modern-task-of-alice-by-bob', method, { taskId: g.aliceTask(), inputResponses: { [key]: { action: 'accept', content: { name: 'Mallory' } } } }, [-32602], 'bob'))
    case 3: return live(g.modernCase('modern-update-wrong-type', 'tasks/update', { taskId, inputResponses: g.rng.pick(['x', 1, [], null, true, [{ action: 'accept' }]]) }, [-32602]))
    // An answer that is not an object is no answer: ignored (or refused), like keys of no pending input.
    case 4: return live(g.modernCase('modern-update-non-object-answer', 'tasks/update', { taskId, inputResponses: { [key]: g.rng.pick([1, 'x', null, true, [], [{ action: 'accept', content: { name: 'Array' } }]]) } }, ['result', -32602]))
    case 5: return live(g.modernCase('modern-update-unknown-keys', 'tasks/update', { taskId: g.rng.pick(g.t.liveIds), inputResponses: JSON.parse('{"constructor":{"action":"accept"},"toString":{},"bogus":{"action":"decline"}}') as Json }, ['result']))
    default: return g.modernCase('modern-cancel-finished', 'tasks/cancel', { taskId: g.rng.pick(g.t.completedIds) }, ['result'])
  }
}

const requestState: Generator = (g) => {
  const real = g.t.requestState
  const [payload, mac] = real.split('.') as [string, string]
  const forged = Buffer.from(JSON.stringify({ c: g.rng.text(22), o: g.rng.text(16), p: 'alice', x: 9e15 })).toString('base64url')
  // Every mutation changes what the state says or its signature bytes (not merely their spelling).
  const state = g.rng.pick<() => unknown>([
    () => g.rng.text(1 + g.rng.int(120)), () => '', () => '.', () => 'a.b', () => `${real}.x`, () => `${real}${real}`, () => real.slice(0, -5), () => payload, () => `.${mac}`,
    () => `${g.mutate(payload)}.${mac}`, () => `${payload}.${g.mutate(mac.slice(0, -1))}${mac.slice(-1)}`, () => `${forged}.${mac}`, () => `${payload}.`, () => g.rng.pick(WRONG_TYPES),
  ])()
  const who = g.rng.chance(0.25) ? 'bob' : 'alice'
  const params = { name: 'demo__ask_user', arguments: {}, requestState: who === 'bob' ? real : state, inputResponses: { 'elicitation-x': { action: 'accept', content: { name: 'Forged' } } } }
  return live(g.modernCase(`request-state-${who}`, 'tools/call', params, [-32602], who, g.rng.chance(0.5) ? PLAIN_CAPS : TASK_CAPS))
}

const legacyMisc: Generator = (g) => {
  const info = { name: 'fuzz', version: '1' }
  if (g.rng.chance(0.15)) return g.legacy('notification', g.who(), { jsonrpc: JSONRPC, method: g.rng.pick(['notifications/cancelled', 'notifications/progress', 'notifications/initialized', 'notifications/roots/list_changed']), params: { requestId: `nobody-${g.rng.text(8)}`, reason: 42, progress: 'x' } }, ACCEPTED)
  const [method, params, ...outcomes] = g.rng.pick<[string, unknown, ...Outcome[]]>([
    ['tools/call', { name: g.rng.pick([42, null, {}, [], '', undefined, 'demo__nope', 'demo__', '__proto__', 'constructor', 'demo__echo ', 'DEMO__ECHO', 'demo__echo\u0000']), arguments: {} }, -32602],
    ['tools/call', { name: 'demo__slow', task: g.rng.pick(['x', 1, [], null, true, { ttl: -1 }, { ttl: 'x' }, { ttl: {} }]), arguments: { duration: 1 } }, -32602],
    ['tools/call', { name: g.rng.pick(['demo__slow', 'demo__echo']), ...(g.rng.chance(0.5) && { task: {} }), arguments: g.rng.pick(['x', 1, [], null, true]) }, -32602],
    ['initialize', g.rng.pick([{}, { protocolVersion: 1, capabilities: {}, clientInfo: info }, { protocolVersion: '2025-11-25', capabilities: 'x', clientInfo: info }, { protocolVersion: '2025-11-25', capabilities: {} }, { protocolVersion: '2025-11-25', clientInfo: { name: 1 } }]), -32602],
    // The demo upstream offers no logging: the gateway has no logging/setLevel, as the server has none (-32601).
    ['logging/setLevel', { level: g.rng.pick(['x', 1, null, 'DEBUG', '']) }, -32601],
    ['tools/list', { cursor: g.rng.pick(['x', 1, 'not-a-cursor', 'bzotMQ', '']) }, -32602],
    ['prompts/get', { name: g.rng.pick(['nope', 1, 'demo__nope']) }, -32602],
    ['resources/read', { uri: g.rng.pick([1, null, '', 'demo://nope/x']) }, -32602, -32002],
    ['completion/complete', { ref: g.rng.pick([undefined, 'x', { type: 'x' }]), argument: {} }, -32602],
  ])
  return g.rpc(`misc-${method}`, g.who(), method, params, ...outcomes)
}

/** Weights: about a sixth of the requests carry bodies near or over the limit (what a leak would keep). */
const GENERATORS: Array<[number, Generator]> = [
  [6, badJson], [4, notRpc], [8, badMessage], [5, unknownMethod], [7, session], [5, auth], [8, headers], [4, httpMethod],
  [18, bodySize], [4, deep], [6, protoKeys], [10, legacyTasks], [7, answers],
  [9, envelope], [7, modernTasks], [6, requestState], [7, legacyMisc],
]
const TOTAL = GENERATORS.reduce((sum, [weight]) => sum + weight, 0)

/** Case `index` of the run seeded with `seed`. */
export function generateCase (seed: number, index: number, targets: FuzzTargets): FuzzCase {
  const rng = new Rng((seed ^ Math.imul(index + 1, 0x9e3779b1)) >>> 0)
  let roll = rng.int(TOTAL)
  for (const [weight, generate] of GENERATORS) {
    if (roll < weight) return generate(new Gen(rng, targets, index))
    roll -= weight
  }
  throw new Error('unreachable')
}
