// What capacity planning needs, measured (docs/capacity.md): the gateway's memory per client upstream session
// on a stdio and on a Streamable HTTP upstream, the processes and memory a stdio upstream session adds, and the
// gateway's memory per task in flight. The gateway runs as it ships (`node dist/main.js`, a child process with
// bench/lib/child-probe.mjs preloaded, which reports its heap and RSS after a garbage collection); the upstream
// is the bundled demo server. Prints a table and writes the numbers as JSON.
//
//   npx tsx bench/capacity.ts
//
// CAPACITY_SESSIONS  client sessions at each step, comma separated (default 10,20,40); each opens one upstream
//                    session (its first tools/call), so maxSessions is raised to the last step
// CAPACITY_NPX       client sessions for the npx run (default 5): server-memory started as `npx mcp-server-memory`,
//                    as operators often start published servers, to count the processes npx adds
// CAPACITY_TASKS     long tasks put in flight for the per-task figure (default 2000)
// CAPACITY_OUT       the JSON file (default <tmp>/mcp-task-gateway-bench/capacity.json)
import { mkdir, writeFile } from 'node:fs/promises'
import { cpus, loadavg, tmpdir, totalmem } from 'node:os'
import { dirname, join } from 'node:path'
import { buildDist } from '../scripts/build.ts'
import { startGateway, type GatewayHandle } from './lib/gateway.ts'
import { McpHttpSession } from './lib/mcp-http.ts'
import { closeAll, startDemoUpstream } from './lib/processes.ts'
import { sampleTree } from './lib/process-tree.ts'
import { readSettings } from './lib/settings.ts'
import { renderTable } from './lib/stats.ts'
import { createTasks, LONG_TASK } from './lib/tasks.ts'

const STEPS = (process.env.CAPACITY_SESSIONS ?? '10,20,40').split(',').map(Number)
const NPX_SESSIONS = Number(process.env.CAPACITY_NPX ?? 5)
const TASKS = Number(process.env.CAPACITY_TASKS ?? 2000)
const OUT = process.env.CAPACITY_OUT ?? join(tmpdir(), 'mcp-task-gateway-bench', 'capacity.json')
const MIB = 1024 * 1024

interface Sample {
  sessions: number
  gatewayHeapBytes: number
  gatewayRssBytes: number
  /** Processes under the gateway (its stdio upstreams) and the sum of their RSS and private memory. */
  children: number
  childrenRssBytes: number
  childrenAnonBytes: number
  /** The HTTP upstream's RSS (Streamable HTTP runs only). */
  upstreamRssBytes?: number
}

function log (message: string): void {
  process.stderr.write(`capacity: ${message}\n`)
}

async function sample (gateway: GatewayHandle, sessions: number, upstreamPid?: number): Promise<Sample> {
  const stats = await gateway.readStats({ gc: true })
  if (stats === undefined) throw new Error('the gateway must run as a child process (BENCH_GATEWAY=child)')
  const tree = sampleTree(gateway.pid!)
  const children = tree.processes.filter((p) => p.pid !== gateway.pid)
  return {
    sessions,
    gatewayHeapBytes: stats.heapUsedBytes,
    gatewayRssBytes: stats.rssBytes,
    children: children.length,
    childrenRssBytes: children.reduce((n, p) => n + p.rssBytes, 0),
    childrenAnonBytes: children.reduce((n, p) => n + p.rssAnonBytes, 0),
    ...(upstreamPid !== undefined && { upstreamRssBytes: sampleTree(upstreamPid).rssBytes }),
  }
}

/** What opens a client's upstream session: its first call. */
type FirstCall = (session: McpHttpSession, n: number) => Promise<unknown>
const echo: FirstCall = (session, n) => session.echo('demo__echo', `session ${n}`)

/** Opens client sessions up to each step, each with one call (which opens its upstream session), and samples. */
async function sessionSteps (gateway: GatewayHandle, upstreamPid?: number, steps = STEPS, first = echo): Promise<Sample[]> {
  const samples = [await sample(gateway, 0, upstreamPid)]
  const open: McpHttpSession[] = []
  try {
    for (const step of steps) {
      while (open.length < step) {
        const session = await McpHttpSession.open(gateway.url, 1)
        open.push(session)
        await first(session, open.length)
      }
      samples.push(await sample(gateway, step, upstreamPid))
      log(`${step} sessions: ${JSON.stringify(samples.at(-1))}`)
    }
  } finally {
    await Promise.all(open.map((s) => s.close()))
  }
  return samples
}

/** Per session between the first sample and the last. */
function perSession (samples: readonly Sample[], field: keyof Sample): number {
  const first = samples[0]!
  const last = samples.at(-1)!
  return ((last[field] ?? 0) - (first[field] ?? 0)) / (last.sessions - first.sessions)
}

async function main (): Promise<void> {
  await buildDist()
  const settings = { ...readSettings(), gatewayMode: 'child' as const, gatewayLogLevel: 'warn' }
  const maxSessions = Math.max(...STEPS) + 8
  const upstream = { maxSessions, maxSessionsPerPrincipal: 1 }

  log('stdio upstream (node dist/demo/main.js), one process per upstream session')
  const stdioGateway = await startGateway(settings, {
    upstreamUrl: '',
    stdio: { command: process.execPath, args: ['dist/demo/main.js'] },
    store: 'memory',
    upstream,
  })
  const stdio = await sessionSteps(stdioGateway).finally(() => stdioGateway.close())

  log('stdio upstream started through npx (npx mcp-server-memory)')
  const npxGateway = await startGateway(settings, {
    upstreamUrl: '',
    stdio: { command: 'npx', args: ['--no-install', 'mcp-server-memory'] },
    store: 'memory',
    upstream: { ...upstream, env: { MEMORY_FILE_PATH: join(tmpdir(), `capacity-memory-${process.pid}.jsonl`) } },
  })
  const readGraph: FirstCall = (session) => session.request('tools/call', { name: 'demo__read_graph', arguments: {} })
  const npx = await sessionSteps(npxGateway, undefined, [NPX_SESSIONS], readGraph).finally(() => npxGateway.close())
  const npxTree = npx.at(-1)!

  log('Streamable HTTP upstream (the demo server as one HTTP process)')
  const demo = await startDemoUpstream()
  const httpGateway = await startGateway(settings, { upstreamUrl: demo.url, store: 'memory', upstream })
  const http = await sessionSteps(httpGateway, demo.pid).finally(() => httpGateway.close())
  await demo.close()

  log(`${TASKS} long tasks in flight on one session (memory store)`)
  const taskGateway = await startGateway(settings, {
    upstreamUrl: '',
    stdio: { command: process.execPath, args: ['dist/demo/main.js'] },
    store: 'memory',
    tasks: { maxActivePerPrincipal: 2 * TASKS },
    upstream: { maxQueuedCalls: 2 * TASKS },
    server: { shutdownGrace: 0 },
  })
  let tasks: { before: Sample, after: Sample }
  try {
    const session = await McpHttpSession.open(taskGateway.url, 8)
    await session.echo('demo__echo', 'warm')
    const before = await sample(taskGateway, 1)
    await createTasks(session, TASKS, 8, LONG_TASK)
    const after = await sample(taskGateway, 1)
    tasks = { before, after }
    await session.close()
  } finally {
    await taskGateway.close()
  }

  const machine = {
    date: new Date().toISOString(),
    cpu: `${cpus().length} × ${cpus()[0]?.model.trim() ?? '?'}`,
    memory: `${(totalmem() / 1024 ** 3).toFixed(1)} GiB`,
    node: process.version,
    load: loadavg().map((n) => n.toFixed(2)).join(', '),
  }
  const results = {
    machine,
    steps: STEPS,
    stdio,
    npx,
    http,
    tasks: { count: TASKS, ...tasks },
    derived: {
      stdioGatewayHeapPerSession: perSession(stdio, 'gatewayHeapBytes'),
      stdioGatewayRssPerSession: perSession(stdio, 'gatewayRssBytes'),
      stdioProcessesPerSession: perSession(stdio, 'children'),
      stdioProcessRss: perSession(stdio, 'childrenRssBytes'),
      stdioProcessAnon: perSession(stdio, 'childrenAnonBytes'),
      npxProcessesPerSession: perSession(npx, 'children'),
      npxRssPerSession: perSession(npx, 'childrenRssBytes'),
      npxAnonPerSession: perSession(npx, 'childrenAnonBytes'),
      httpGatewayHeapPerSession: perSession(http, 'gatewayHeapBytes'),
      httpGatewayRssPerSession: perSession(http, 'gatewayRssBytes'),
      httpUpstreamRssPerSession: perSession(http, 'upstreamRssBytes'),
      taskHeap: (tasks.after.gatewayHeapBytes - tasks.before.gatewayHeapBytes) / TASKS,
      taskRss: (tasks.after.gatewayRssBytes - tasks.before.gatewayRssBytes) / TASKS,
    },
  }
  await mkdir(dirname(OUT), { recursive: true })
  await writeFile(OUT, JSON.stringify(results, null, 2))

  const kib = (bytes: number): string => `${(bytes / 1024).toFixed(1)} KiB`
  const mib = (bytes: number): string => `${(bytes / MIB).toFixed(1)} MiB`
  const d = results.derived
  process.stdout.write(`${JSON.stringify(machine)}\n`)
  process.stdout.write(renderTable({
    title: 'memory by open client sessions (each with its upstream session)',
    head: [
      'sessions', 'stdio: gateway heap', 'gateway RSS', 'upstream processes', 'their RSS', 'their private',
      'http: gateway heap', 'gateway RSS', 'upstream RSS',
    ],
    rows: stdio.map((s, i) => [
      String(s.sessions), mib(s.gatewayHeapBytes), mib(s.gatewayRssBytes),
      String(s.children), mib(s.childrenRssBytes), mib(s.childrenAnonBytes),
      mib(http[i]!.gatewayHeapBytes), mib(http[i]!.gatewayRssBytes), mib(http[i]!.upstreamRssBytes ?? 0),
    ]),
  }) + '\n')
  process.stdout.write(`\nper upstream session: stdio gateway heap ${kib(d.stdioGatewayHeapPerSession)}, RSS ${kib(d.stdioGatewayRssPerSession)}; ` +
    `${d.stdioProcessesPerSession.toFixed(2)} processes, ${mib(d.stdioProcessRss)} RSS (${mib(d.stdioProcessAnon)} private) each; ` +
    `http gateway heap ${kib(d.httpGatewayHeapPerSession)}, RSS ${kib(d.httpGatewayRssPerSession)}, upstream RSS ${kib(d.httpUpstreamRssPerSession)}\n`)
  process.stdout.write(`npx mcp-server-memory: ${d.npxProcessesPerSession.toFixed(2)} processes, ${mib(d.npxRssPerSession)} RSS ` +
    `(${mib(d.npxAnonPerSession)} private) per upstream session; ${npxTree.children} processes for ${npxTree.sessions} client sessions ` +
    'and the gateway\'s own\n')
  process.stdout.write(`per task in flight (${TASKS}): heap ${kib(d.taskHeap)}, RSS ${kib(d.taskRss)}\n`)
  process.stdout.write(`results: ${OUT}\n`)
}

main().then(() => closeAll(), async (err: unknown) => {
  log(err instanceof Error ? err.stack ?? err.message : String(err))
  await closeAll()
  process.exitCode = 1
})
