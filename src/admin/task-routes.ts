import type { FastifyInstance } from 'fastify'
import { GatewayError } from '../errors.ts'
import type { TaskStore } from '../store/types.ts'
import { isTerminal } from '../wire/task-state.ts'
import type { TaskService } from '../tasks/task-service.ts'
import { detail, encodeCursor, parseTaskList, summarize } from './task-view.ts'

export interface TaskRouteDeps {
  store: TaskStore
  tasks: TaskService
}

interface TaskParams {
  id: string
}

/**
 * The tasks of every principal, across the whole store (every gateway process sharing it):
 * `GET /admin/tasks` (filtered, newest first, in pages), `GET /admin/tasks/:id`, `POST /admin/tasks/:id/cancel`.
 */
export function registerTaskRoutes (app: FastifyInstance, { store, tasks }: TaskRouteDeps): void {
  app.get('/admin/tasks', async (request) => {
    const { query, before, limit } = parseTaskList(request.query as Record<string, unknown>)
    // One more than asked tells whether a next page exists.
    const found = await store.query(query, before, limit + 1, Date.now())
    const page = found.slice(0, limit)
    return { tasks: page.map(summarize), ...(found.length > limit && { nextCursor: encodeCursor(page.at(-1)!) }) }
  })

  app.get<{ Params: TaskParams }>('/admin/tasks/:id', async (request) => {
    const task = await store.get(request.params.id, Date.now())
    if (!task) throw new GatewayError('GW_ERR_ADMIN_TASK_NOT_FOUND', [request.params.id])
    const [inputs, timeline] = await Promise.all([store.inputsOf(task.id), store.timeline(task.id)])
    return detail(task, inputs, timeline)
  })

  // As the principal's own tasks/cancel: the same compare-and-set to cancelled, then the upstream call is
  // cancelled on whichever gateway process runs it (through the store's signal bus).
  app.post<{ Params: TaskParams }>('/admin/tasks/:id/cancel', async (request) => {
    const { id } = request.params
    const task = await store.get(id, Date.now())
    if (!task) throw new GatewayError('GW_ERR_ADMIN_TASK_NOT_FOUND', [id])
    if (isTerminal(task.status)) throw new GatewayError('GW_ERR_ADMIN_TASK_TERMINAL', [id, task.status])
    try {
      return summarize(await tasks.cancel(task.principal, id, 'operator'))
    } catch (err) {
      // It ended (or expired) between the read and the cancel.
      if (!(err instanceof GatewayError)) throw err
      const now = await store.get(id, Date.now())
      if (err.code === 'GW_ERR_TASK_TERMINAL' && now) throw new GatewayError('GW_ERR_ADMIN_TASK_TERMINAL', [id, now.status], { cause: err })
      if (err.code === 'GW_ERR_TASK_TERMINAL' || err.code === 'GW_ERR_TASK_NOT_FOUND') throw new GatewayError('GW_ERR_ADMIN_TASK_NOT_FOUND', [id], { cause: err })
      throw err
    }
  })
}
