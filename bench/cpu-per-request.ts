// `npm run bench:cpu`: CPU time per `tasks/get` of the gateway against a bare Fastify route answering the same
// JSON (the floor of section task-get), and where the gateway's time goes. Unlike requests/s, CPU time per
// request hardly depends on what else the machine runs, so this is the measurement to make cuts by on a busy
// machine: the gateway's CPU per request over the floor's is the inverse of the throughput ratio that section
// task-get reports when the gateway process is what limits the rate.
//
// For each store (memory, sqlite and, when their servers answer, redis and postgres; or BENCH_STORES), each
// revision (2025-11-25 session client, 2026-07-28 client) and auth off and on (one static bearer token), it
// sends BENCH_CPU_REQUESTS tasks/get (after as many for warm-up) with BENCH_CPU_CONCURRENCY workers from the
// bench's load generator, reads the server process's CPU time before and after, and repeats BENCH_CPU_ROUNDS
// times (the median is reported). The floor and a store's gateways are loaded at the same time in each round, so
// that a busy machine weighs on them alike: the ratio of a round holds where its absolute numbers do not. With
// BENCH_CPU_PROFILE=1 it then profiles one more window of each gateway and itemises its CPU per request by part of
// the work (bench/lib/cpu-items.ts).
//
// Environment: BENCH_CPU_REQUESTS (2000), BENCH_CPU_CONCURRENCY (16), BENCH_CPU_ROUNDS (3), BENCH_CPU_PROFILE
// (0 | 1), BENCH_CPU_AUTH (off,on), BENCH_CPU_BUILD (1 | 0: measure dist/ as it is, not rebuilt), BENCH_STORES,
// BENCH_REDIS_URL, BENCH_POSTGRES_URL, BENCH_OUT (results file, default cpu-per-request.json in the bench's temp
// directory).
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { buildDist } from '../scripts/build.ts'
import { PARTS, itemise } from './lib/cpu-items.ts'
import { startFastifyFloor, type FloorHandle } from './lib/floors.ts'
import type { GatewayHandle } from './lib/gateway.ts'
import { startGateway } from './lib/gateway.ts'
import { generate, type PreparedRequest } from './lib/loadgen.ts'
import { McpHttpSession } from './lib/mcp-http.ts'
import { MODERN_VERSION, ModernHttpClient } from './lib/modern-http.ts'
import { closeAll, procCpuMs, startDemoUpstream } from './lib/processes.ts'
import { readSettings } from './lib/settings.ts'
import { renderTable, type Table } from './lib/stats.ts'
import { startAuthTaskGateway } from './lib/task-auth.ts'
import { createTasks, measuredStores, startTaskGateway, type StoreKind } from './lib/tasks.ts'
import type { BenchContext } from './lib/types.ts'

const env = process.env
const REQUESTS = Number(env.BENCH_CPU_REQUESTS ?? 2000)
const CONCURRENCY = Number(env.BENCH_CPU_CONCURRENCY ?? 16)
const ROUNDS = Number(env.BENCH_CPU_ROUNDS ?? 3)
const PROFILE = env.BENCH_CPU_PROFILE === '1'
const AUTH = (env.BENCH_CPU_AUTH ?? 'off,on').split(',').map((a) => a.trim() === 'on')
/** Tasks in flight per client: tasks/get asks about them in turn. */
const TASKS = 64
/** Every counted answer says the task is still in flight. */
const EXPECT = '"status":"working"'
const REVISIONS = ['2025-11-25', MODERN_VERSION] as const
type Revision = typeof REVISIONS[number]

const log = (message: string): void => { process.stderr.write(`bench:cpu: ${message}\n`) }
const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

/** One gateway of the run and its two clients' prepared tasks/get requests. */
interface Measured {
  name: string
  gateway: GatewayHandle
  requests: Map<Revision, PreparedRequest[]>
  close: () => Promise<void>
}

function prepare (client: McpHttpSession | ModernHttpClient, ids: string[]): PreparedRequest[] {
  return Array.from({ length: 4096 }, (_, i) => client.prepare('tasks/get', { taskId: ids[i % ids.length]! }))
}

async function gatewayFor (ctx: BenchContext, store: StoreKind, auth: boolean): Promise<Measured> {
  const name = `${store}, auth ${auth ? 'on' : 'off'}`
  log(`starting a gateway: ${name}`)
  if (auth) {
    const g = await startAuthTaskGateway(ctx, store, TASKS, CONCURRENCY)
    const requests = new Map([[REVISIONS[0], prepare(g.session, g.ids)], [REVISIONS[1], prepare(g.modern, g.modernIds)]])
    return { name, gateway: g.gateway, requests, close: g.close }
  }
  const gateway = await startTaskGateway(ctx, store, { maxTasks: 4 * TASKS })
  const session = await McpHttpSession.open(gateway.url, CONCURRENCY)
  const modern = new ModernHttpClient(gateway.url, CONCURRENCY, { tasks: true })
  const [ids, modernIds] = await Promise.all([createTasks(session, TASKS, 16), createTasks(modern, TASKS, 16)])
  return {
    name,
    gateway,
    requests: new Map([[REVISIONS[0], prepare(session, ids)], [REVISIONS[1], prepare(modern, modernIds)]]),
    close: async () => { await session.close(); await modern.close(); await gateway.close() },
  }
}

/** CPU ms of the server (read by `cpuMs`) over `REQUESTS` tasks/get of `requests`; µs per request. */
async function cpuPerRequest (requests: PreparedRequest[], cpuMs: () => Promise<number | undefined>, count = REQUESTS): Promise<number> {
  const before = await cpuMs()
  const run = await generate({ requests, concurrency: CONCURRENCY, durationMs: 600_000, maxRequests: count, expect: EXPECT })
  const after = await cpuMs()
  if (before === undefined || after === undefined) throw new Error('no CPU time for the server process')
  return (after - before) * 1000 / run.calls
}

/** The probe's CPU clock of a child gateway (reset, then read: a difference of two reads is what we need). */
function gatewayCpu (gateway: GatewayHandle): () => Promise<number | undefined> {
  let total = 0
  return async () => {
    const stats = await gateway.readStats()
    if (stats === undefined) return undefined
    total += stats.cpuMs
    await gateway.resetStats()
    return total
  }
}

async function main (): Promise<void> {
  const settings = readSettings()
  // BENCH_CPU_BUILD=0 keeps dist/ as it is: a second run beside a first one measures the same build.
  if (env.BENCH_CPU_BUILD !== '0') await buildDist()
  const upstream = await startDemoUpstream()
  const ctx: BenchContext = {
    settings,
    upstream,
    gateway: () => { throw new Error('bench:cpu starts its own gateways') },
    startGateway: (options) => startGateway(settings, { ...options, upstreamUrl: upstream.url }),
    log,
  }
  const stores = await measuredStores(ctx)
  const profileDir = PROFILE ? await mkdtemp(join(tmpdir(), 'mcp-gw-cpu-')) : undefined
  const floors = new Map<Revision, { floor: FloorHandle, requests: PreparedRequest[] }>()
  /** µs per request by target (`<store>, auth <on|off>, <revision>` or `floor <revision>`), one value per round. */
  const rounds = new Map<string, number[]>()
  const items = new Map<string, Map<string, number>>()
  const keep = (target: string, us: number): void => { rounds.set(target, [...rounds.get(target) ?? [], us]) }

  for (const store of stores) {
    const measured: Measured[] = []
    try {
      for (const auth of AUTH) measured.push(await gatewayFor(ctx, store, auth))
      for (const revision of REVISIONS) {
        if (floors.has(revision)) continue
        const first = measured[0]!
        const client = first.requests.get(revision)![0]!
        const template = await answerOf(client)
        const floor = await startFastifyFloor(template)
        const origin = new URL(floor.url).origin
        floors.set(revision, { floor, requests: first.requests.get(revision)!.map((r) => ({ ...r, origin })) })
      }
      for (const revision of REVISIONS) {
        const { floor, requests } = floors.get(revision)!
        const floorCpu = async (): Promise<number | undefined> => procCpuMs(floor.pid)
        // The floor and the gateways of a round are loaded at the same time: whatever else the machine runs then
        // weighs on each of them alike, so each round's ratio holds even when the rounds differ twofold.
        const round = async (): Promise<number[]> => await Promise.all([
          cpuPerRequest(requests, floorCpu),
          ...measured.map((m) => cpuPerRequest(m.requests.get(revision)!, gatewayCpu(m.gateway))),
        ])
        log(`${store}, ${revision}: warm-up`)
        await round()
        for (let r = 1; r <= ROUNDS; r++) {
          log(`${store}, ${revision}: round ${r}/${ROUNDS}, ${REQUESTS} requests per target`)
          const [floorUs, ...gatewayUs] = await round()
          keep(`floor ${revision}`, floorUs!)
          measured.forEach((m, i) => keep(`${m.name}, ${revision}`, gatewayUs[i]!))
        }
        const last = (target: string): string => `${target} ${rounds.get(target)!.map((us) => us.toFixed(1)).join(' ')}`
        log(`${store}, ${revision}: µs per request by round: ${[`floor ${revision}`, ...measured.map((m) => `${m.name}, ${revision}`)].map(last).join('; ')}`)
        if (profileDir === undefined) continue
        for (const m of measured) {
          const target = `${m.name}, ${revision}`
          const file = join(profileDir, `${target.replace(/[^\w.]+/g, '-')}.cpuprofile`)
          await m.gateway.startProfile()
          const own = m.requests.get(revision)!
          await generate({ requests: own, concurrency: CONCURRENCY, durationMs: 600_000, maxRequests: REQUESTS, expect: EXPECT })
          await m.gateway.stopProfile(file)
          const { parts } = itemise(file)
          items.set(target, new Map([...parts].map(([part, us]) => [part, us / REQUESTS])))
          log(`profile of ${target}: ${file}`)
        }
      }
    } finally {
      for (const m of measured) await m.close()
    }
  }

  const fmt = (value: number | undefined): string => value === undefined ? '—' : value.toFixed(1)
  // A gateway's rounds pair with the floor's of the same store: the floor rounds are kept in store order.
  const floorRounds = (target: string): number[] => {
    const all = rounds.get(`floor ${REVISIONS.find((r) => target.endsWith(r))!}`)!
    const store = stores.indexOf(target.slice(0, target.indexOf(',')) as StoreKind)
    return all.slice(store * ROUNDS, (store + 1) * ROUNDS)
  }
  const table: Table = {
    title: `CPU µs per tasks/get, median of ${ROUNDS} rounds of ${REQUESTS} requests, ${CONCURRENCY} workers per target, ` +
      'the floor and the gateways of a store loaded at the same time (above floor and the ratio: medians of the rounds\' own)',
    head: ['store, auth, revision', 'floor µs', 'gateway µs', 'above floor µs', 'floor ÷ gateway', 'floor rounds', 'gateway rounds'],
    rows: [...rounds].filter(([target]) => !target.startsWith('floor')).map(([target, values]) => {
      const floor = floorRounds(target)
      const above = median(values.map((us, i) => us - floor[i]!))
      const ratio = median(values.map((us, i) => floor[i]! / us))
      return [target, fmt(median(floor)), fmt(median(values)), fmt(above), `${(100 * ratio).toFixed(0)} %`, floor.map(fmt).join(' '), values.map(fmt).join(' ')]
    }),
  }
  process.stdout.write(`${renderTable(table)}\n\n`)
  if (items.size > 0) {
    const targets = [...items.keys()]
    const itemTable: Table = {
      title: 'CPU µs per tasks/get by part of the work (one profiled window per gateway; profiling adds its own cost)',
      head: ['part', ...targets],
      rows: PARTS.filter((part) => targets.some((t) => (items.get(t)!.get(part) ?? 0) >= 0.05))
        .map((part) => [part, ...targets.map((t) => fmt(items.get(t)!.get(part) ?? 0))])
        .concat([['total (busy)', ...targets.map((t) => fmt([...items.get(t)!.values()].reduce((a, b) => a + b, 0)))]]),
    }
    process.stdout.write(`\n${renderTable(itemTable)}\n\n  · profiles: ${profileDir}\n`)
  }
  const out = env.BENCH_OUT ?? join(tmpdir(), 'mcp-task-gateway-bench', 'cpu-per-request.json')
  await mkdir(dirname(out), { recursive: true })
  await writeFile(out, JSON.stringify({ requests: REQUESTS, concurrency: CONCURRENCY, rounds: Object.fromEntries(rounds), items: Object.fromEntries([...items].map(([t, m]) => [t, Object.fromEntries(m)])) }, null, 2) + '\n')
  process.stdout.write(`\nresults: ${out}\n`)
}

/** The gateway's answer to one prepared request, as the floor replays it. */
async function answerOf (request: PreparedRequest): Promise<{ contentType: string, answer: Record<string, unknown> }> {
  const res = await fetch(`${request.origin}${request.path}`, { method: 'POST', headers: request.headers, body: request.body })
  const contentType = res.headers.get('content-type') ?? 'application/json'
  const text = await res.text()
  const json = contentType.startsWith('text/event-stream') ? /^data: (.*)$/m.exec(text)?.[1] ?? '{}' : text
  return { contentType, answer: JSON.parse(json) as Record<string, unknown> }
}

let interrupted = false
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (interrupted) return
    interrupted = true
    const exit = (): never => process.exit(signal === 'SIGINT' ? 130 : 143)
    closeAll().then(exit, exit)
  })
}

let code = 0
try {
  await main()
} catch (err) {
  code = 1
  process.stderr.write(`bench:cpu failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`)
} finally {
  await closeAll()
}
process.exit(code)
