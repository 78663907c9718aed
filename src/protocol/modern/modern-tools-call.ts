import type { Catalog } from '../../catalog/catalog.ts'
import type { CallEngine } from '../../calls/call-engine.ts'
import type { HeldCalls, HeldOutcome } from '../../calls/held-calls.ts'
import type { TasksConfig } from '../../config/schema.ts'
import type { Handler, RequestContext } from '../../dispatch/context.ts'
import { optionalObject, optionalString, requireString } from '../../dispatch/params.ts'
import { RpcError } from '../../errors.ts'
import type { SignalBus, TaskRecord } from '../../store/types.ts'
import type { TaskService } from '../../tasks/task-service.ts'
import { isTerminal } from '../../tasks/task-state.ts'
import type { JsonObject } from '../jsonrpc.ts'
import { taskChannel } from '../legacy/task-delivery.ts'
import { declaresTasks, tasksCapabilityRequired } from './envelope.ts'
import type { RequestStateCodec } from './request-state.ts'
import { renderCreateTaskResult } from './task-wire.ts'

export interface ModernToolsCallDeps {
  catalog: Catalog
  calls: CallEngine
  held: HeldCalls
  states: RequestStateCodec
  tasks: TaskService
  bus: SignalBus
  config: TasksConfig
}

/** Waits up to `ms` for the task to end or to need input; returns its latest state. */
async function settleWithin (deps: ModernToolsCallDeps, task: TaskRecord, ms: number, signal: AbortSignal): Promise<TaskRecord> {
  const done = (t: TaskRecord): boolean => isTerminal(t.status) || t.status === 'input_required'
  await new Promise<void>((resolve) => {
    const timer = setTimeout(finish, ms)
    const unsubscribe = deps.bus.subscribe(taskChannel(task.id), finish)
    signal.addEventListener('abort', finish, { once: true })
    void deps.tasks.get(task.principal, task.id).then((t) => { if (done(t)) finish() }, finish)
    function finish (): void {
      clearTimeout(timer)
      unsubscribe()
      signal.removeEventListener('abort', finish)
      resolve()
    }
  })
  return await deps.tasks.get(task.principal, task.id)
}

/**
 * `tools/call` for modern clients. With the tasks extension declared, the gateway decides: a task
 * (always, or when the call outlasts `tasks.decide.after`). Otherwise the call is synchronous and input
 * the upstream asks for comes back as `input_required` (MRTR); the client's retry resumes the same
 * upstream call through its signed requestState.
 */
export function modernToolsCall (deps: ModernToolsCallDeps): Handler {
  const { catalog, calls, held, states } = deps

  const render = (outcome: HeldOutcome, ctx: RequestContext): JsonObject => {
    if (outcome.kind === 'result') return { ...outcome.result, resultType: 'complete' }
    return { resultType: 'input_required', inputRequests: outcome.inputRequests, requestState: states.mint(outcome.callId, ctx.session.principal) }
  }

  return async (params, ctx) => {
    const route = catalog.tool(requireString(params, 'name'))
    const principal = ctx.session.principal
    const capabilities = ctx.session.clientCapabilities
    const requestState = optionalString(params, 'requestState')
    if (requestState !== undefined) {
      const callId = states.verify(requestState, principal)
      return render(await held.resume(callId, principal, optionalObject(params, 'inputResponses') ?? {}, ctx.signal), ctx)
    }
    const tasksDeclared = declaresTasks(capabilities)
    if (route.taskSupport === 'required' && !tasksDeclared) throw tasksCapabilityRequired()
    if (tasksDeclared && route.taskSupport !== 'forbidden') {
      const task = await deps.tasks.create({
        principal,
        sessionId: null,
        era: 'modern',
        route,
        params,
        requestedTtl: undefined,
        progressToken: undefined,
        clientCapabilities: capabilities,
      })
      const decide = deps.config.decide
      const latest = decide === 'always' ? task : await settleWithin(deps, task, decide.after, ctx.signal)
      const outcome = latest.outcome
      if (latest.status === 'completed' || (latest.status === 'failed' && outcome !== null)) {
        if (outcome !== null && 'result' in outcome) return { ...outcome.result, resultType: 'complete' }
        if (outcome !== null && 'error' in outcome) throw new RpcError(outcome.error.code, outcome.error.message, outcome.error.data)
      }
      return renderCreateTaskResult(latest)
    }
    const progressToken = ctx.progressToken
    return render(await held.start(principal, (ask, signal) => calls.run(route, params, {
      capabilities,
      ask,
      ...(progressToken !== undefined && {
        progress: (progress: JsonObject) => ctx.notify('notifications/progress', { ...progress, progressToken }),
      }),
      notify: () => {},
    }, signal), ctx.signal), ctx)
  }
}
