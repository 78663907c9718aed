import type { ServerResponse } from 'node:http'
import type { FastifyInstance } from 'fastify'
import type { RecentProblems } from '../observability/recent-problems.ts'
import type { SignalBus } from '../store/types.ts'
import type { AdminUpstream } from './admin-routes.ts'
import { watchTaskFeed } from './task-feed.ts'

export interface AdminEventDeps {
  bus: SignalBus
  /** This process's upstreams as the admin API shows them. */
  upstreams (): AdminUpstream[]
  /** This process's refusals and errors; undefined when they are not kept (metrics off). */
  problems: RecentProblems | undefined
  processId: string
}

/** How often the upstreams' state and load are compared with what a stream last sent (sent only when changed). */
export const UPSTREAM_CHECK_MS = 2000
/** A comment line this often keeps proxies and the browser from closing an idle stream. */
const KEEP_ALIVE_MS = 15_000
/** New problems are sent at most this often, together (a burst of refusals is one message). */
const PROBLEMS_EVERY_MS = 500
/** A stream whose reader falls this far behind is closed; the dashboard reconnects and reads everything again. */
const MAX_BUFFERED_BYTES = 1024 * 1024

/**
 * `GET /admin/events`: a server-sent event stream (behind the admin token, like every admin route) of
 * `hello` (this process, its upstreams and its problems; sent once the stream hears every task change),
 * `task` (a task of any process sharing the store was created or changed: the task as GET /admin/tasks
 * lists it), `upstreams` (their state or load changed) and `problems` (new refusals or errors of this
 * process, with the counts). Browsers read it with fetch(), which can send the token header (EventSource
 * cannot).
 */
export function registerAdminEvents (app: FastifyInstance, deps: AdminEventDeps): void {
  const open = new Set<() => void>()
  app.addHook('onClose', async () => {
    for (const close of [...open]) close()
  })

  app.get('/admin/events', async (request, reply) => {
    reply.hijack()
    const res: ServerResponse = reply.raw
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      'x-accel-buffering': 'no',
    })
    const timers: NodeJS.Timeout[] = []
    const stops: Array<() => void> = []
    const close = (): void => {
      if (!open.delete(close)) return
      for (const timer of timers) clearInterval(timer)
      for (const stop of stops) stop()
      if (!res.writableEnded) res.end()
    }
    open.add(close)
    request.raw.once('close', close)
    res.once('close', close)

    const send = (event: string, data: unknown): void => {
      if (res.writableEnded) return
      res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`)
      if (res.writableLength > MAX_BUFFERED_BYTES) close()
    }

    // Subscribed before `hello`: a reader that lists the tasks after it misses no change in between (and the
    // changes before it are in that list).
    let greeted = false
    stops.push(watchTaskFeed(deps.bus, (message) => { if (greeted) send('task', message) }))
    await deps.bus.subscribed()
    if (!open.has(close)) return
    let upstreams = JSON.stringify(deps.upstreams())
    send('hello', { processId: deps.processId, upstreams: JSON.parse(upstreams) as unknown, problems: deps.problems?.snapshot() ?? null })
    greeted = true

    timers.push(setInterval(() => {
      const now = JSON.stringify(deps.upstreams())
      if (now === upstreams) return
      upstreams = now
      send('upstreams', { upstreams: JSON.parse(now) as unknown })
    }, UPSTREAM_CHECK_MS))
    timers.push(setInterval(() => { if (!res.writableEnded) res.write(': keep-alive\n\n') }, KEEP_ALIVE_MS))

    const problems = deps.problems
    if (problems !== undefined) {
      let pending: NodeJS.Timeout | undefined
      stops.push(problems.listen(() => {
        pending ??= setTimeout(() => {
          pending = undefined
          send('problems', problems.snapshot())
        }, PROBLEMS_EVERY_MS)
      }))
      stops.push(() => clearTimeout(pending))
    }
    for (const timer of timers) timer.unref()
  })
}
