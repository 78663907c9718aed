import type { Catalog } from '../../catalog/catalog.ts'
import type { Route } from '../../catalog/catalog-view.ts'
import { callTarget, type CallEngine } from '../../calls/call-engine.ts'
import type { HeldCalls, HeldOutcome } from '../../calls/held-calls.ts'
import type { Live } from '../../config/live.ts'
import type { TasksConfig } from '../../config/schema.ts'
import { requestOrigin, type Handler, type RequestContext } from '../../dispatch/context.ts'
import { optionalObject, optionalString, requireString } from '../../wire/params.ts'
import type { TaskInputs } from '../../tasks/task-inputs.ts'
import { heldCallPlan, type HeldTaskLink } from '../../tasks/held-task-link.ts'
import type { CreateTaskRequest, TaskService } from '../../tasks/task-service.ts'
import type { JsonObject } from '../../wire/jsonrpc.ts'
import { capabilityRequired, declaresTasks, tasksCapabilityRequired } from './envelope.ts'
import type { RetryRouter } from './retry-router.ts'
import { renderCreateTaskResult } from './task-wire.ts'

export interface ModernToolsCallDeps {
  catalog: Catalog
  calls: CallEngine
  held: HeldCalls
  retries: RetryRouter
  tasks: TaskService
  inputs: TaskInputs
  /** tasks.* in force: read per call (the decision window, the ttl), never kept. */
  readonly config: Live<TasksConfig>
}

/** What a held call needs to become a task if it outlasts the decision window. */
interface TaskCandidate {
  route: Route
  params: JsonObject
  capabilities: JsonObject
  authorization: string | undefined
  /** Whom the task's limits count (Caller.account); undefined: the principal. */
  account: string | undefined
  /** The server span of the request that started the call (tracing on): the task's trace is its. */
  trace: RequestContext['trace']
  /** Where the call's upstream work runs, once known: recorded when the call becomes a task. */
  link?: HeldTaskLink | undefined
}

/**
 * `tools/call` for 2026-07-28 clients. The call runs synchronously; input the upstream asks for comes back
 * as `input_required` (MRTR) and the client's retry resumes the same upstream call through its signed
 * requestState, on the gateway process holding the call (see RetryRouter). When the client declares the
 * tasks extension, the gateway decides: with `tasks.decide: always` the call is a task from the start; with
 * `{ after }` a call that is still running after that time becomes a task, and so does one that asks for
 * input within it (`input: task`, the default; with `input: round` the input comes back as `input_required`
 * first). A tool that runs only as a task (the gateway's policy or the upstream says `required`) is never
 * answered directly: input it asks for within the window comes back as rounds, and the round that ends or
 * outlasts the window becomes the task (SEP-2663's MRTR-then-task composition).
 */
export function modernToolsCall (deps: ModernToolsCallDeps): Handler {
  const { catalog, calls, held, retries } = deps
  const candidates = new Map<string, TaskCandidate>()
  // A call that ends, becomes a task or is abandoned by its client (the hold expires) needs no candidate.
  held.onForget((callId) => candidates.delete(callId))

  const taskRequest = (principal: string, candidate: TaskCandidate): CreateTaskRequest => ({
    principal,
    sessionId: null,
    era: '2026-07-28',
    route: candidate.route,
    params: candidate.params,
    requestedTtl: undefined,
    progressToken: undefined,
    clientCapabilities: candidate.capabilities,
    authorization: candidate.authorization,
    account: candidate.account,
    trace: candidate.trace,
  })

  const render = async (outcome: HeldOutcome, principal: string): Promise<JsonObject> => {
    if (outcome.kind === 'result') return { ...outcome.result, resultType: 'complete' }
    if (outcome.kind === 'input') {
      return { resultType: 'input_required', inputRequests: outcome.inputRequests, requestState: retries.mint(outcome.callId, principal) }
    }
    const candidate = candidates.get(outcome.callId)
    candidates.delete(outcome.callId)
    if (!candidate) throw new Error('a running call without a task candidate')
    try {
      const task = await deps.tasks.adopt(taskRequest(principal, candidate), (created) => ({
        ...held.detach(outcome.callId, (method, params, signal, upstreamId) =>
          deps.inputs.ask(created, method, params, signal, upstreamId)),
        link: candidate.link,
      }))
      return renderCreateTaskResult(task)
    } catch (err) {
      // No task took the call (the store refused it): nobody could answer it or collect its outcome.
      held.abandon(outcome.callId, err)
      throw err
    }
  }

  // Runs in the process holding the call, whichever process the retry reached.
  const retry = retries.route('tools/call', async ({ callId, principal, inputResponses }, signal) =>
    await render(await held.resume(callId, principal, inputResponses, signal), principal))

  return async (rawParams, ctx) => {
    // A `task` field is a 2025-11-25 request for a task; in this era the server decides, so it is dropped.
    const { task: _ignored, ...params } = rawParams
    const route = (await catalog.view(ctx.client, ctx.caller)).tool(requireString(params, 'name'), ctx.caller.access)
    const principal = ctx.client.principal
    const capabilities = ctx.clientCapabilities
    const requestState = optionalString(params, 'requestState')
    if (requestState !== undefined) return await retry(requestState, principal, optionalObject(params, 'inputResponses') ?? {}, ctx.signal)
    const tasksDeclared = declaresTasks(capabilities)
    if (route.taskSupport === 'required' && !tasksDeclared) throw tasksCapabilityRequired()
    const eligible = tasksDeclared && route.taskSupport !== 'forbidden'
    const taskOnly = eligible && (route.taskSupport === 'required' || route.nativeTaskSupport === 'required')
    const decide = deps.config.decide
    const { authorization, account } = ctx.caller
    const candidate: TaskCandidate = { route, params, capabilities, authorization, account, trace: ctx.trace }
    if (eligible && decide === 'always') return renderCreateTaskResult(await deps.tasks.create(taskRequest(principal, candidate)))
    let startedId: string | undefined
    // A call that may become a task is made as the task's call would be, so that the task can be resumed elsewhere.
    const { target, link } = eligible ? heldCallPlan(route) : { target: callTarget(route), link: undefined }
    candidate.link = link
    const outcome = await held.start(principal, ctx.caller, (ask, signal, fail, sent) => calls.run(target, params, {
      ...requestOrigin(ctx, ask, signal),
      sent,
      // The client must learn what it lacks (-32021), not get a result built on a refused request.
      refused: (capability) => fail(capabilityRequired(capability)),
      notify: () => {},
      upstreamTask: link?.hooks,
    }), ctx.signal, eligible && decide !== 'always' ? { ms: decide.after, taskOnly, inputMakesTask: !taskOnly && decide.input === 'task' } : undefined)
    if (outcome.kind !== 'result') startedId = outcome.callId
    if (eligible && startedId !== undefined) candidates.set(startedId, candidate)
    return await render(outcome, principal)
  }
}

/**
 * `prompts/get` for 2026-07-28 clients: an upstream that asks for input while building a prompt gets it
 * through MRTR rounds, like a tool call (never as a task).
 */
export function modernPromptsGet (deps: Pick<ModernToolsCallDeps, 'catalog' | 'calls' | 'held' | 'retries'>): Handler {
  const { catalog, calls, held, retries } = deps
  const render = (outcome: HeldOutcome, principal: string): JsonObject => {
    if (outcome.kind === 'result') return { ...outcome.result, resultType: 'complete' }
    if (outcome.kind === 'input') return { resultType: 'input_required', inputRequests: outcome.inputRequests, requestState: retries.mint(outcome.callId, principal) }
    throw new Error('prompts/get has no decision window')
  }
  const retry = retries.route('prompts/get', async ({ callId, principal, inputResponses }, signal) =>
    render(await held.resume(callId, principal, inputResponses, signal), principal))
  return async (params, ctx) => {
    const route = (await catalog.view(ctx.client, ctx.caller)).prompt(requireString(params, 'name'), ctx.caller.access)
    const principal = ctx.client.principal
    const requestState = optionalString(params, 'requestState')
    if (requestState !== undefined) return await retry(requestState, principal, optionalObject(params, 'inputResponses') ?? {}, ctx.signal)
    return render(await held.start(principal, ctx.caller, (ask, signal, fail) => calls.run(callTarget(route), params, {
      ...requestOrigin(ctx, ask, signal),
      refused: (capability) => fail(capabilityRequired(capability)),
      // Of what the upstream sends while building a prompt, only input requests reach a 2026-07-28 client.
      progress: undefined,
      notify: () => {},
    }, 'prompts/get'), ctx.signal), principal)
  }
}
