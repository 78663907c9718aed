import type { FastifyInstance } from 'fastify'
import type { Upstream } from '../upstream/upstream.ts'

/** One upstream as the admin API shows it. */
export interface AdminUpstream {
  name: string
  transport: string
  state: string
  /** Why it is not ready, when it is not. */
  reason?: string
  /** The protocol era its gateway session speaks; absent while that session is not open. */
  era?: 'legacy' | 'modern'
  /** Upstream sessions of clients, open or opening (the gateway's own session not counted). */
  sessions: number
  /** Stdio only: server processes running, the gateway session's and one per client session. */
  processes?: number
  /** Calls in flight and calls waiting for a call slot (maxConcurrentCalls). */
  calls: { active: number, waiting: number }
}

export function describeUpstream (upstream: Upstream): AdminUpstream {
  const load = upstream.load
  const era = upstream.era
  return {
    name: upstream.name,
    transport: upstream.config.transport,
    state: upstream.state,
    ...(upstream.reason !== undefined && { reason: upstream.reason }),
    ...(era !== undefined && { era }),
    sessions: load.sessions,
    ...(upstream.config.transport === 'stdio' && { processes: load.sessions + (era === undefined ? 0 : 1) }),
    calls: { active: load.active, waiting: load.waiting },
  }
}

/** `GET /admin/upstreams`: every configured upstream of this process with its state and load. */
export function registerUpstreamRoutes (app: FastifyInstance, upstreams: readonly Upstream[]): void {
  app.get('/admin/upstreams', async () => ({ upstreams: upstreams.map(describeUpstream) }))
}
