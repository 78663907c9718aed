// The task sections' gateways with auth on: the same configuration as the shared ones (bench/lib/tasks.ts),
// plus one static bearer token in auth.tokens, and clients that send it with every request. task-get measures
// them against the same Fastify floor as the gateways without auth: the floor is a bare route serving the
// same JSON and checks no token, so what authentication costs the gateway counts against it.
import { createHash } from 'node:crypto'
import { McpHttpSession } from './mcp-http.ts'
import { ModernHttpClient } from './modern-http.ts'
import { createTasks, startTaskGateway, CREATE_WARMUP, type SharedTaskGateway, type StoreKind } from './tasks.ts'
import type { BenchContext } from './types.ts'

/** The bench's bearer token (a test value: the gateway stores only its SHA-256). */
const BENCH_TOKEN = 'mcp-task-gateway-bench-token-0123456789abcdef'
/** The principal the token authenticates. */
export const BENCH_PRINCIPAL = 'bench'
/** What every request of an authenticated client carries. */
export const AUTH_HEADERS: Readonly<Record<string, string>> = { authorization: `Bearer ${BENCH_TOKEN}` }

/** The auth section of the bench's gateways with auth on: one static token, every scope of it granted (no permissions). */
export function benchAuth (): Record<string, unknown> {
  return { tokens: [{ principal: BENCH_PRINCIPAL, sha256: createHash('sha256').update(BENCH_TOKEN).digest('hex'), scopes: ['tasks'] }] }
}

export interface AuthTaskGateway extends SharedTaskGateway {
  close (): Promise<void>
}

/**
 * A gateway with this store and auth on, with `tasks` long-running tasks in flight for each revision's client
 * (both authenticate as BENCH_PRINCIPAL, so they are one principal: its limits admit both sets).
 */
export async function startAuthTaskGateway (
  ctx: BenchContext,
  store: StoreKind,
  tasks: number,
  connections: number,
): Promise<AuthTaskGateway> {
  const gateway = await startTaskGateway(ctx, store, { maxTasks: 2 * tasks + CREATE_WARMUP }, benchAuth())
  try {
    const session = await McpHttpSession.open(gateway.url, connections, { ...AUTH_HEADERS })
    const modern = new ModernHttpClient(gateway.url, connections, { tasks: true, headers: { ...AUTH_HEADERS } })
    const [ids, modernIds] = await Promise.all([createTasks(session, tasks, 16), createTasks(modern, tasks, 16)])
    return {
      store,
      gateway,
      session,
      ids,
      seeded: ids.length,
      modern,
      modernIds,
      close: async () => {
        await session.close()
        await modern.close()
        await gateway.close()
      },
    }
  } catch (err) {
    await gateway.close()
    throw err
  }
}
