// Section "scale", figure "stdio sessions": a stdio upstream with `sessions: per-client` spawns one process per
// client; what that costs at BENCH_SCALE_STDIO clients: the RSS of the gateway and every process under it, and
// how many there are. One gateway (its own process) in front of the bench's echo server; clients are added
// (initialize and one `echo` each, so each one's process is up and answering) up to each size in turn.
import { echoCommand } from '../lib/echo-stdio.ts'
import { McpHttpSession } from '../lib/mcp-http.ts'
import { processTree, reapLeftovers, sampleTree, type TreeSample } from '../lib/process-tree.ts'
import type { BenchContext } from '../lib/types.ts'

/** Clients opening at once (each spawns a process). */
const OPENERS = 8

export interface StdioSizeResult {
  clients: number
  processes: number
  rssBytes: number
  rssAnonBytes: number
  /** Beyond the gateway with no client (its own upstream session included), per client. */
  perClient: { processes: number, rssBytes: number, rssAnonBytes: number }
}

export interface StdioScaleResult {
  idle: { processes: number, rssBytes: number, rssAnonBytes: number }
  sizes: StdioSizeResult[]
}

function summary (tree: TreeSample): { processes: number, rssBytes: number, rssAnonBytes: number } {
  return { processes: tree.processes.length, rssBytes: tree.rssBytes, rssAnonBytes: tree.rssAnonBytes }
}

export async function measureStdioSessions (ctx: BenchContext, sizes: readonly number[]): Promise<StdioScaleResult | undefined> {
  const most = Math.max(...sizes)
  const gateway = await ctx.startGateway({
    stdio: echoCommand(),
    upstream: { prefix: '', sessions: 'per-client', maxSessions: most + 10, maxSessionsPerPrincipal: most + 10 },
    server: { shutdownGrace: 0 },
  })
  const pid = gateway.mode === 'child' ? gateway.pid : undefined
  const clients: McpHttpSession[] = []
  try {
    // In the bench process (BENCH_GATEWAY=inprocess) the tree would be the whole bench.
    if (pid === undefined) return undefined
    const warm = await McpHttpSession.open(gateway.url, 1)
    await warm.echo('echo', 'warm-up')
    await warm.close()
    await gateway.readStats({ gc: true })
    const idle = summary(sampleTree(pid))
    const results: StdioSizeResult[] = []
    for (const size of sizes) {
      ctx.log(`scale stdio: ${size} clients, each with its own upstream process`)
      let next = clients.length
      await Promise.all(Array.from({ length: OPENERS }, async () => {
        while (next < size) {
          next++
          const client = await McpHttpSession.open(gateway.url, 1)
          clients.push(client)
          await client.echo('echo', 'scale')
        }
      }))
      await gateway.readStats({ gc: true })
      const tree = summary(sampleTree(pid))
      results.push({
        clients: size,
        ...tree,
        perClient: {
          processes: (tree.processes - idle.processes) / size,
          rssBytes: (tree.rssBytes - idle.rssBytes) / size,
          rssAnonBytes: (tree.rssAnonBytes - idle.rssAnonBytes) / size,
        },
      })
    }
    return { idle, sizes: results }
  } finally {
    await Promise.all(clients.map((c) => c.close()))
    const descendants = pid === undefined ? [] : processTree(pid).slice(1)
    await gateway.close()
    await reapLeftovers(descendants)
  }
}
