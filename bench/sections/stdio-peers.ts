// Section "stdio-peers": one stdio MCP server (bench/lib/echo-stdio-server.mjs) behind three Streamable
// HTTP front ends: the gateway (stdio upstream, sessions per-client), mcp-proxy and supergateway
// (--stateful). Each path gets the same client code and load: one session calling `echo` at
// concurrency 1 (latency) and 16 (calls/s); then the RSS of the front end and every process under it;
// then the first call of fresh clients (initialize → first tools/call answered), each right after a
// start of the echo server alone, so the two are compared at the same moment of a machine whose speed
// drifts. Only one front end runs at a time, each round starts them afresh, and odd rounds run them in
// the reverse order.
// Budgets (design.md §4): gateway calls/s ≥ the better peer's, at ≤ 1.5 × that peer's RSS (upstream
// processes included); a new client's first call ≤ the echo server's own start time + 50 ms.
import { cpus } from 'node:os'
import { echoCommand, echoStartMs } from '../lib/echo-stdio.ts'
import { concurrent, sequential, type LoadRun } from '../lib/load.ts'
import { McpHttpSession } from '../lib/mcp-http.ts'
import { startMcpProxy, startSupergateway, type FrontEnd } from '../lib/peer-front-ends.ts'
import { describeTree, processTree, reapLeftovers, sampleTree, type TreeSample } from '../lib/process-tree.ts'
import { concat, ms, signedMs, summarize, type LatencySummary, type Table } from '../lib/stats.ts'
import { closeSharedTaskGateways, mib, split } from '../lib/tasks.ts'
import type { BenchContext, Check, Section, SectionResult } from '../lib/types.ts'

const CONCURRENCY = 16
const FIRST_CALL_CLIENTS = 5
const RSS_RATIO_LIMIT = 1.5
const FIRST_CALL_SLACK_MS = 50
/** How long a front end may take to end the upstream processes of a client whose session was deleted. */
const SESSION_END_WAIT_MS = 5000
const TEXT = 'benchmark payload'

const PATHS = ['gateway', 'mcp-proxy', 'supergateway'] as const
type PathName = typeof PATHS[number]
const PEERS = ['mcp-proxy', 'supergateway'] as const

/** One path in one round: a fresh front end, measured, then closed. */
interface RoundSample {
  c1: LoadRun
  cN: LoadRun
  /** Sampled right after the c=16 phase; undefined when the front end has no process of its own. */
  tree: TreeSample | undefined
  firstCallMs: number[]
  /** The echo server's start alone, one measured just before each first call. */
  serverStartMs: number[]
  /** Most processes still under the front end 5 s after a fresh client's session was deleted. */
  lingering: number
  /** Its descendants still running after it exited (killed by the bench). */
  leftovers: number
  stderr: string[]
}

interface PathResult {
  c1: LatencySummary
  callsPerSecond: number
  cN: LatencySummary
  /** Mean over rounds of the tree's summed VmRSS. */
  rssBytes: number | undefined
  /** Mean over rounds of the tree's summed RssAnon (private memory). */
  rssAnonBytes: number | undefined
  processes: number | undefined
  /** The last round's tree: process names, and each process's RSS, front end first. */
  processNames: string
  processRss: string
  firstCallMs: number
  firstCallSamples: number[]
  /** Median of the server starts measured alongside this path's first calls. */
  serverStartMs: number
  serverStartSamples: number[]
  lingering: number
  leftovers: number
  stderr: string[]
}

function median (values: readonly number[]): number {
  return summarize(Float64Array.from(values)).p50
}

function mean (values: readonly number[] | undefined): number | undefined {
  return values === undefined || values.length === 0 ? undefined : values.reduce((a, b) => a + b, 0) / values.length
}

async function startFrontEnd (ctx: BenchContext, path: PathName): Promise<FrontEnd> {
  if (path === 'mcp-proxy') return await startMcpProxy(echoCommand())
  if (path === 'supergateway') return await startSupergateway(echoCommand())
  // prefix '' keeps the tool's own name, so one client call fits all three paths.
  const gateway = await ctx.startGateway({ stdio: echoCommand(), upstream: { prefix: '', sessions: 'per-client' } })
  // In the bench process (BENCH_GATEWAY=inprocess) its tree would be the whole bench: no RSS then.
  const pid = gateway.mode === 'child' ? gateway.pid : undefined
  let leftovers = 0
  return {
    url: gateway.url,
    pid,
    stderrLines: () => gateway.stderrLines(),
    leftovers: () => leftovers,
    close: async () => {
      const descendants = pid === undefined ? [] : processTree(pid).slice(1)
      await gateway.close()
      leftovers = (await reapLeftovers(descendants)).length
    },
  }
}

function liveProcesses (pid: number | undefined): number {
  return pid === undefined ? 0 : processTree(pid).filter((p) => !p.zombie).length
}

/**
 * A fresh client's initialize, notifications/initialized and first `echo`, timed to the answer; then
 * its session is deleted and, so that one client's teardown never overlaps the next one's start, the
 * front end is given time to end the processes it started for it. Returns the ms and how many
 * processes too many were still there after that wait.
 */
async function firstCall (frontEnd: FrontEnd): Promise<{ ms: number, lingering: number }> {
  const before = liveProcesses(frontEnd.pid)
  const started = performance.now()
  const client = await McpHttpSession.open(frontEnd.url, 1)
  let elapsed: number
  try {
    await client.echo('echo', TEXT)
    elapsed = performance.now() - started
  } finally {
    await client.close()
  }
  const deadline = Date.now() + SESSION_END_WAIT_MS
  while (liveProcesses(frontEnd.pid) > before && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
  return { ms: elapsed, lingering: Math.max(0, liveProcesses(frontEnd.pid) - before) }
}

async function measureRound (ctx: BenchContext, path: PathName, calls: number, sliceMs: number): Promise<RoundSample> {
  const { settings } = ctx
  const frontEnd = await startFrontEnd(ctx, path)
  let session: McpHttpSession | undefined
  let sample: Omit<RoundSample, 'leftovers' | 'stderr'>
  try {
    session = await McpHttpSession.open(frontEnd.url, CONCURRENCY)
    const call = (): Promise<void> => session!.echo('echo', TEXT)
    await sequential(call, settings.warmup)
    await concurrent(call, CONCURRENCY, 1000)
    const c1 = await sequential(call, calls)
    const cN = await concurrent(call, CONCURRENCY, sliceMs)
    const tree = frontEnd.pid === undefined ? undefined : sampleTree(frontEnd.pid)
    await firstCall(frontEnd) // warm-up of the new-session path, not recorded
    const firstCallMs: number[] = []
    const serverStartMs: number[] = []
    let lingering = 0
    for (let i = 0; i < FIRST_CALL_CLIENTS; i++) {
      serverStartMs.push(await echoStartMs())
      const result = await firstCall(frontEnd)
      firstCallMs.push(result.ms)
      lingering = Math.max(lingering, result.lingering)
    }
    sample = { c1, cN, tree, firstCallMs, serverStartMs, lingering }
  } finally {
    await session?.close()
    await frontEnd.close()
  }
  return { ...sample, leftovers: frontEnd.leftovers(), stderr: frontEnd.stderrLines() }
}

function aggregate (samples: readonly RoundSample[]): PathResult {
  const trees = samples.map((s) => s.tree)
  const measuredTrees = trees.every((t) => t !== undefined) ? trees as TreeSample[] : undefined
  const calls = samples.reduce((n, s) => n + s.cN.calls, 0)
  const elapsedMs = samples.reduce((n, s) => n + s.cN.elapsedMs, 0)
  const firstCallSamples = samples.flatMap((s) => s.firstCallMs)
  const serverStartSamples = samples.flatMap((s) => s.serverStartMs)
  return {
    c1: summarize(concat(samples.map((s) => s.c1.latencies))),
    callsPerSecond: calls / (elapsedMs / 1000),
    cN: summarize(concat(samples.map((s) => s.cN.latencies))),
    rssBytes: mean(measuredTrees?.map((t) => t.rssBytes)),
    rssAnonBytes: mean(measuredTrees?.map((t) => t.rssAnonBytes)),
    processes: measuredTrees === undefined ? undefined : Math.max(...measuredTrees.map((t) => t.processes.length)),
    processNames: measuredTrees === undefined ? 'n/a' : describeTree(measuredTrees.at(-1)!.processes),
    processRss: measuredTrees === undefined ? 'n/a' : measuredTrees.at(-1)!.processes.map((p) => mib(p.rssBytes)).join(' + '),
    firstCallMs: median(firstCallSamples),
    firstCallSamples,
    serverStartMs: median(serverStartSamples),
    serverStartSamples,
    lingering: Math.max(...samples.map((s) => s.lingering)),
    leftovers: samples.reduce((n, s) => n + s.leftovers, 0),
    stderr: [...new Set(samples.flatMap((s) => s.stderr))],
  }
}

function budgetChecks (results: Record<PathName, PathResult>): Check[] {
  const better = PEERS.reduce((a, b) => results[b].callsPerSecond > results[a].callsPerSecond ? b : a)
  const gateway = results.gateway
  const peer = results[better]
  const rssLimit = peer.rssBytes === undefined ? undefined : peer.rssBytes * RSS_RATIO_LIMIT
  const firstCallLimit = gateway.serverStartMs + FIRST_CALL_SLACK_MS
  return [
    {
      budget: `stdio upstream: gateway calls/s at concurrency ${CONCURRENCY}`,
      limit: `≥ ${better}'s ${peer.callsPerSecond.toFixed(0)}/s`,
      measured: `${gateway.callsPerSecond.toFixed(0)}/s`,
      pass: gateway.callsPerSecond >= peer.callsPerSecond,
    },
    {
      budget: 'stdio upstream: gateway RSS, upstream processes included',
      limit: rssLimit === undefined ? `≤ ${RSS_RATIO_LIMIT} × ${better}'s` : `≤ ${RSS_RATIO_LIMIT} × ${better}'s = ${mib(rssLimit)} MiB`,
      measured: gateway.rssBytes === undefined ? 'n/a' : `${mib(gateway.rssBytes)} MiB`,
      pass: gateway.rssBytes === undefined || rssLimit === undefined ? undefined : gateway.rssBytes <= rssLimit,
    },
    {
      budget: 'stdio upstream: first call of a new client via the gateway',
      limit: `≤ server start + ${FIRST_CALL_SLACK_MS} ms = ${ms(firstCallLimit, 1)} ms`,
      measured: `${ms(gateway.firstCallMs, 1)} ms`,
      pass: gateway.firstCallMs <= firstCallLimit,
    },
  ]
}

async function run (ctx: BenchContext): Promise<SectionResult> {
  const { settings } = ctx
  // The task sections' gateways, thousands of tasks each, would otherwise still be running.
  await closeSharedTaskGateways()
  const callsPerRound = split(settings.calls, settings.rounds)
  const sliceMs = settings.seconds * 1000 / settings.rounds
  const samples: Record<PathName, RoundSample[]> = { gateway: [], 'mcp-proxy': [], supergateway: [] }
  ctx.log('stdio-peers: one unmeasured start of the echo server alone (disk and code caches)')
  await echoStartMs()
  for (let round = 0; round < settings.rounds; round++) {
    for (const path of round % 2 === 0 ? PATHS : [...PATHS].reverse()) {
      ctx.log(`stdio-peers round ${round + 1}/${settings.rounds}, ${path}: warm-up, ${callsPerRound[round] ?? 1} calls at c=1, ` +
        `${(sliceMs / 1000).toFixed(1)} s at c=${CONCURRENCY}, ${FIRST_CALL_CLIENTS} new clients each after a start of the echo server alone`)
      samples[path].push(await measureRound(ctx, path, callsPerRound[round] ?? 1, sliceMs))
    }
  }
  const results = Object.fromEntries(PATHS.map((path) => [path, aggregate(samples[path])])) as Record<PathName, PathResult>
  const serverStarts = PATHS.flatMap((path) => results[path].serverStartSamples)
  const serverStartMs = median(serverStarts)

  const table: Table = {
    title: `echo over stdio behind each front end: one session; latency at c=1 (${settings.calls} calls), calls/s at c=${CONCURRENCY} ` +
      `(${settings.seconds} s), RSS of the front end and its descendants after that, median first call of a new client`,
    head: ['path', 'p50 ms', 'p99 ms', `calls/s at c=${CONCURRENCY}`, 'RSS MiB (processes)', 'first call ms'],
    rows: PATHS.map((path) => {
      const r = results[path]
      return [path, ms(r.c1.p50), ms(r.c1.p99), r.callsPerSecond.toFixed(0),
        r.rssBytes === undefined ? 'n/a' : `${mib(r.rssBytes)} (${r.processes ?? '?'})`, ms(r.firstCallMs, 1)]
    }),
  }
  const firstCallTable: Table = {
    title: `first call of a new client (initialize → first tools/call answered; ${FIRST_CALL_CLIENTS} clients per round, ms) ` +
      'vs the echo server started alone (spawn → initialize result) just before each',
    head: ['path', 'median', 'min', 'max', 'server start median', '− server start'],
    rows: [
      ...PATHS.map((path) => {
        const r = results[path]
        const s = summarize(Float64Array.from(r.firstCallSamples))
        return [
          path,
          ms(s.p50, 1),
          ms(Math.min(...r.firstCallSamples), 1),
          ms(s.max, 1),
          ms(r.serverStartMs, 1),
          signedMs(s.p50 - r.serverStartMs, 1),
        ]
      }),
      ['echo server alone, all samples', ms(serverStartMs, 1), ms(Math.min(...serverStarts), 1), ms(Math.max(...serverStarts), 1), '', ''],
    ],
  }

  const notes = [
    ...PATHS.map((path) => {
      const r = results[path]
      return `${path} after the c=${CONCURRENCY} phase: ${r.processNames}, RSS ${r.processRss} MiB (front end first); ` +
        `private memory (RssAnon) ${r.rssAnonBytes === undefined ? 'n/a' : mib(r.rssAnonBytes)} MiB of the ${r.rssBytes === undefined ? 'n/a' : mib(r.rssBytes)}`
    }),
    'gateway: its own upstream session plus one per client (sessions: per-client); mcp-proxy: one upstream process for all sessions; supergateway: sh -c plus the server per session',
    `gateway first call − the echo server's start measured alongside: ${signedMs(results.gateway.firstCallMs - results.gateway.serverStartMs, 1)} ms ` +
      `(starts: ${results.gateway.serverStartSamples.map((v) => v.toFixed(0)).join(', ')} ms)`,
    `${cpus().length} CPU cores shared by the bench client, the front end and its echo servers; maxConcurrentCalls of the gateway ${settings.maxConcurrentCalls ?? 16}${settings.maxConcurrentCalls === undefined ? ' (default)' : ''}`,
    'the gateway runs compiled from dist/ as it ships (as in every section); the peers run their published JavaScript',
    'supergateway has no host option and listens on every interface; the bench talks to it on 127.0.0.1 only',
    ...PATHS.filter((path) => results[path].lingering > 0)
      .map((path) => `${path}: ${results[path].lingering} process(es) still running ${SESSION_END_WAIT_MS / 1000} s after a client's session was deleted`),
    ...PATHS.filter((path) => results[path].leftovers > 0)
      .map((path) => `${path}: ${results[path].leftovers} descendant process(es) outlived it and were killed by the bench`),
    ...PATHS.flatMap((path) => results[path].stderr.slice(0, 4).map((line) => `${path} stderr: ${line}`)),
  ]
  const data = {
    serverStartMs,
    serverStarts,
    concurrency: CONCURRENCY,
    paths: Object.fromEntries(PATHS.map((path) => [path, {
      ...results[path],
      rounds: samples[path].map((s) => ({
        c1: { calls: s.c1.calls, elapsedMs: s.c1.elapsedMs },
        cN: { calls: s.cN.calls, elapsedMs: s.cN.elapsedMs },
        tree: s.tree,
        firstCallMs: s.firstCallMs,
        serverStartMs: s.serverStartMs,
      })),
    }])),
  }
  return { tables: [table, firstCallTable], checks: budgetChecks(results), notes, data }
}

export const stdioPeersSection: Section = {
  id: 'stdio-peers',
  title: 'Stdio upstream behind the gateway, mcp-proxy and supergateway',
  run,
}
