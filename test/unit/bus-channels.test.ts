import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { parseConfig } from '../../src/config/load.ts'
import { GatewayError } from '../../src/errors.ts'
import { buildGateway } from '../../src/gateway.ts'
import { BUS, busChannelTable, checkBusPayload, wireName } from '../../src/store/bus-channels.ts'
import { MemoryStore } from '../../src/store/memory/memory-store.ts'

const OPERATIONS = fileURLToPath(new URL('../../docs/operations.md', import.meta.url))
const START = '<!-- bus-channels: generated from src/store/bus-channels.ts; test/unit/bus-channels.test.ts keeps it so -->'
const END = '<!-- bus-channels: end -->'
const upstreams = [{ name: 'a', transport: 'stdio', command: 'node' }]

/** The problems of a configuration error, as `path: message`. */
function problems (err: unknown): string[] {
  expect(err).toBeInstanceOf(GatewayError)
  expect((err as GatewayError).code).toBe('GW_ERR_CONFIG_INVALID')
  return ((err as GatewayError).data as Array<{ path: string, message: string }>).map((p) => `${p.path}: ${p.message}`)
}

describe('the table of channels between processes', () => {
  it('is listed in docs/operations.md as the code has it', () => {
    const page = readFileSync(OPERATIONS, 'utf8')
    const start = page.indexOf(START)
    const end = page.indexOf(END)
    expect(start, 'the start marker of the table in docs/operations.md').toBeGreaterThan(0)
    expect(page.slice(start + START.length, end).trim()).toBe(busChannelTable())
  })

  it('gives every channel a name of its own', () => {
    const names = Object.values(BUS).map((entry) => wireName(entry))
    expect(new Set(names).size).toBe(names.length)
  })

  it('checks a payload against the schema of the channel it came on, keyed or not', () => {
    expect(checkBusPayload(wireName(BUS.task, 't1'), { type: 'status', status: 'completed' })).toBe(true)
    expect(checkBusPayload(wireName(BUS.task, 't1'), { type: 'status', status: 'bogus' })).toBe(false)
    expect(checkBusPayload(wireName(BUS.takeover), { from: 'p1' })).toBe(true)
    // An unkeyed channel with a key, another version, a channel not in the table, a payload missing a field.
    expect(checkBusPayload(`${wireName(BUS.takeover)}:x`, { from: 'p1' })).toBe(false)
    expect(checkBusPayload('task.v0:t1', { type: 'status', status: 'completed' })).toBe(false)
    expect(checkBusPayload('peer:p1', { type: 'abort', id: 'x' })).toBe(false)
    expect(checkBusPayload(wireName(BUS.peer, 'p1'), { type: 'request', id: 'x', kind: 'home/request', from: 'p2' })).toBe(false)
  })
})

describe('server.stateSecret with a shared store', () => {
  it('is required with the redis store, and the error names it', () => {
    let caught: unknown
    try {
      parseConfig({ store: { kind: 'redis' }, upstreams })
    } catch (err) {
      caught = err
    }
    expect(problems(caught)).toEqual([expect.stringMatching(/^server\.stateSecret: is required with the redis and postgres stores/)])
    expect(parseConfig({ store: { kind: 'redis' }, server: { stateSecret: 'sixteen characters or more' }, upstreams }).store.kind).toBe('redis')
  })

  it('is required with the postgres store too', () => {
    let caught: unknown
    try {
      parseConfig({ store: { kind: 'postgres' }, upstreams })
    } catch (err) {
      caught = err
    }
    expect(problems(caught)).toEqual([expect.stringMatching(/^server\.stateSecret: is required with the redis and postgres stores/)])
    expect(parseConfig({ store: { kind: 'postgres' }, server: { stateSecret: 'sixteen characters or more' }, upstreams }).store).toMatchObject({
      kind: 'postgres', url: 'postgres://127.0.0.1:5432/postgres', schema: 'mcp_task_gateway', poolSize: 10, acquireTimeout: 5000,
    })
  })

  it('is required when the gateway is given a store several processes share', async () => {
    const store = new MemoryStore()
    Object.defineProperty(store, 'shared', { value: true })
    const config = parseConfig({ store: { kind: 'memory' }, upstreams })
    const built = buildGateway(config, { store })
    await expect(built).rejects.toThrow(GatewayError)
    expect(problems(await built.catch((err: unknown) => err))).toEqual(['server.stateSecret: is required with a store several gateway processes share'])
  })
})
