import { GatewayError, RpcError, errorMessage } from '../errors.ts'
import type { TaskSupport } from '../config/schema.ts'
import type { Logger } from '../observability/logger.ts'
import type { TaskOutcome, TaskRecord, TaskResume, TaskStore } from '../store/types.ts'
import type { Upstream } from '../upstream/upstream.ts'
import type { UpstreamSession } from '../upstream/upstream-session.ts'
import { isLostTask } from '../calls/extension-task.ts'
import type { TaskInputs } from './task-inputs.ts'
import type { TaskServiceDeps } from './task-service.ts'

/**
 * How a gateway task is tied to the upstream's own task: whether it runs as one, whether another gateway
 * process may resume it, and what a process that resumed it owes the upstream.
 */

export interface UpstreamTaskPlan {
  /** The call runs as the upstream's own task. */
  native: boolean
  /** Another process may reach the upstream work again: the upstream task, or a plain call's replayable stream. */
  resumable: boolean
}

/**
 * Whether a task of `tool` runs as the upstream's own task, and whether another gateway process may resume it:
 * with `resume: auto` (the default) on a Streamable HTTP upstream, a tool the upstream can run as a task runs as
 * one, and any other call is resumed if the upstream replays its stream. A tool the upstream requires as a task
 * always runs as one.
 */
export function upstreamTaskPlan (upstream: Upstream, tool: string, support: TaskSupport | undefined): UpstreamTaskPlan {
  const resumable = resumeAllowed(upstream, tool)
  return { native: support === 'required' || (support === 'optional' && resumable), resumable }
}

/** Whether another process may resume the tasks of `tool`: `resume: auto` (the default) on a Streamable HTTP upstream. */
export function resumeAllowed (upstream: Upstream, tool: string): boolean {
  const config = upstream.config
  return (config.toolSettings[tool]?.resume ?? config.resume) === 'auto' && config.transport === 'streamable-http'
}

/** The upstreams configured now, by name (the catalog keeps the look-up current across reloads). */
export interface UpstreamLookup {
  upstream (name: string): Upstream | undefined
}

/**
 * What a process that takes a task over may do with it, decided from the configuration in force (a reload may
 * have changed or removed the task's upstream since it started): resume its upstream work, or run it again.
 */
export function takeoverPolicies (upstreams: UpstreamLookup): Pick<TaskServiceDeps, 'isIdempotent' | 'canResume'> {
  return {
    isIdempotent: (task) => upstreams.upstream(task.upstream)?.config.toolSettings[task.tool]?.idempotent === true,
    canResume: (task) => {
      const upstream = upstreams.upstream(task.upstream)
      return upstream !== undefined && resumeAllowed(upstream, task.tool)
    },
  }
}

/** What a resumed task reaches again, for logs and messages: the upstream task, or the call's stream. */
export function resumedWork (resume: TaskResume): string {
  return resume.kind === 'native' ? `upstream task '${resume.upstreamTaskId}'` : 'the stream of its upstream call'
}

/**
 * The error a resumed task fails with when its upstream task could not be reached again (the upstream no longer
 * knows the session or the task: it answers -32602, or the session is gone); undefined for an error of the
 * upstream task itself, which is the task's outcome as it is. A 2026-07-28 upstream's task is polled: only an
 * upstream that no longer knows it makes it unreachable.
 */
export function unreachable (task: TaskRecord, err: unknown): GatewayError | undefined {
  const resume = task.resume
  if (resume === null || resume.kind === 'unsent') return undefined
  const polled = resume.kind === 'native' && resume.era === '2026-07-28'
  if (polled ? !isLostTask(err) : err instanceof RpcError && err.rpcCode !== -32602) return undefined
  return new GatewayError('GW_ERR_TASK_UNREACHABLE', ['stopped', resumedWork(resume), errorMessage(err)], { cause: err })
}

export interface AnswerDeps {
  store: TaskStore
  inputs: TaskInputs
  log: Logger
}

/**
 * The input requests an earlier owner of a resumed task relayed: each answer goes to the upstream under the
 * upstream's own id, once the client gives it. An answer stored already is sent again, since the earlier owner
 * may have stopped before it passed it on; an upstream drops an answer to a request it no longer waits for
 * (request ids are never reused within a session).
 */
export function answerOwed (deps: AnswerDeps, task: TaskRecord, session: UpstreamSession, signal: AbortSignal): void {
  const { store, inputs, log } = deps
  const send = async (id: string | number, answer: TaskOutcome): Promise<void> => {
    // Not when another process took the task over meanwhile (this one was paused past its lease): that one sends it.
    if (await store.ownerOf(task.id, Date.now()) !== task.owner) return
    await session.respond(id, 'error' in answer ? { error: answer.error } : { result: answer.result })
  }
  void store.inputsOf(task.id).then((all) => {
    for (const input of all) {
      const id = input.upstreamRequestId
      if (id === undefined || input.state === 'expired') continue
      const answered = input.state === 'answered' && input.answer !== null
        ? send(id, input.answer)
        : inputs.awaitAnswer(input, signal).then(
          async (result) => { await send(id, { result }) },
          async (err: unknown) => {
            if (err instanceof RpcError) await send(id, { error: { code: err.rpcCode, message: err.message, data: err.data } })
          },
        )
      answered.catch((err: unknown) => log.warn({ err, taskId: task.id, input: input.key }, 'could not pass the answer to an input request on to the upstream'))
    }
  }, (err: unknown) => log.warn({ err, taskId: task.id }, 'could not read the input requests of a resumed task'))
}
