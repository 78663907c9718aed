import type { Route } from '../catalog/catalog-view.ts'
import { optionalObject, withoutProgressToken } from '../wire/params.ts'
import { GatewayError } from '../errors.ts'
import type { JsonObject } from '../wire/jsonrpc.ts'
import type { InputMethod } from '../upstream/call-attribution.ts'
import type { CallSink, UpstreamTaskStatus } from '../upstream/inflight-call.ts'
import { clientSupports, type ClientRef } from '../upstream/client-ref.ts'
import type { Upstream } from '../upstream/upstream.ts'
import type { SlotClaim, SlotLimit } from '../upstream/call-slots.ts'
import { requestUpstream, type RequestPlan } from '../upstream/upstream-request.ts'
import { callUpstream, type UpstreamTaskHooks } from './upstream-call.ts'
import { errorClass, type GatewayMetrics } from '../observability/metrics.ts'
import type { TraceParent } from '../observability/tracing.ts'

/**
 * The client a call is made for, and how the call reaches it: a request's client (live relay in the
 * 2025 era, `input_required` rounds in 2026-07-28) or a task's (queued input).
 */
export interface CallOrigin {
  /** The client whose upstream session carries the call. */
  client: ClientRef
  /** The capabilities the client declared: what may be relayed to it. */
  capabilities: JsonObject
  /** Aborted when the call is no longer wanted (the client cancelled, the task was cancelled, shutdown). */
  signal: AbortSignal
  /** `upstreamRequestId`: the id the upstream gave its request (kept so that another process can answer it). */
  ask (method: InputMethod, params: JsonObject, signal: AbortSignal, upstreamRequestId?: string | number): Promise<JsonObject>
  /** What `ask` asks stays answerable after the call ended (a 2025-era live relay, answered by id on any stream). */
  offersOutliveCall?: boolean
  /** The upstream asked for something the client did not declare (the upstream gets an error regardless). */
  refused? (capability: string, method: InputMethod): void
  progress? (progress: JsonObject): void
  /** A notification of the upstream's during the call (a log message). */
  notify (method: string, params: JsonObject): void
  /** A task's call that runs as the upstream's own task: that task's status changed (see CallSink.upstreamTaskStatus). */
  upstreamTaskStatus? (status: UpstreamTaskStatus): void
  /**
   * The call has to wait for a free call slot of its upstream (maxConcurrentCalls): before it is sent, or once
   * its client answered what it asked (a call waiting on its client holds no slot).
   */
  queued? (limit: SlotLimit): void
  /**
   * The call has its call slot (waiting for it is over): the request is on its way upstream, or the answer it waited
   * for is. A returned promise is awaited before the request is sent (a failure fails the call, nothing sent).
   */
  sent? (): void | Promise<void>
  /** A task's call: it waits for a call slot as long as it takes. Other calls, which a client waits on, give up after slotWaitTimeout. */
  patient?: boolean
  /** The caller's own Authorization header, for upstreams configured with forwardAuthorization. */
  authorization?: string | undefined
  /** The span the call is made for (tracing on): a request's server span, or a task's run span. */
  trace?: TraceParent | undefined
  /** A task's call that runs as the upstream's own task (see UpstreamTaskHooks). */
  upstreamTask?: UpstreamTaskHooks | undefined
  /** A task's call: the largest result the task may store (tasks.maxResultBytes); a larger answer is given up as it arrives. */
  maxResultBytes?: number | undefined
}

/** What a call runs: an upstream, the upstream's own name for the tool or prompt, and whether the upstream runs the tool only as a task. */
export interface CallTarget {
  upstream: Upstream
  target: string
  native: boolean
}

export function callTarget (route: Route): CallTarget {
  return { upstream: route.upstream, target: route.target, native: route.nativeTaskSupport === 'required' }
}

/**
 * The one way an upstream tools/call (or prompts/get) runs, whoever it is for: a synchronous call of either
 * era, a held 2026-07-28 call, or a task. Each call runs on its client's upstream session, within its
 * upstream's call slots; what the upstream asks during the call goes to its origin once the client's
 * capabilities allow it, progress is forwarded with the client's own token, and failures become the
 * gateway's errors.
 */
export class CallEngine {
  readonly #metrics: GatewayMetrics | undefined

  constructor (metrics?: GatewayMetrics) {
    this.#metrics = metrics
  }

  /** Runs one upstream request of `target` for `origin` (a tools/call, or a prompts/get that may ask for input too). */
  async run (target: CallTarget, params: JsonObject, origin: CallOrigin, method: 'tools/call' | 'prompts/get' = 'tools/call'): Promise<JsonObject> {
    optionalObject(params, 'arguments')
    const { client, signal } = origin
    const upstream = target.upstream
    const { slots, config } = upstream
    const principal = client.principal
    // A call a client waits on waits for a slot at most slotWaitTimeout, also for its slot back after an answer.
    const slotWait = origin.patient === true ? undefined : config.slotWaitTimeout
    let claim: SlotClaim | undefined
    /** The call found no slot back in time after an answer: what its client gets, whatever the upstream makes of it. */
    let slotTimedOut: GatewayError | undefined
    const sink: CallSink = {
      input: async (inputMethod, inputParams, inputSignal, upstreamRequestId) => {
        const missing = clientSupports(origin.capabilities, inputMethod, inputParams)
        if (missing) {
          origin.refused?.(missing, inputMethod)
          throw new GatewayError('GW_ERR_CLIENT_CAPABILITY_MISSING', [missing, inputMethod])
        }
        // Waiting on the client holds no call slot: the upstream waits for the answer, and a client that never
        // answers must not keep others from the upstream. The slot is taken again, ahead of new calls, before the
        // answer goes upstream.
        claim?.park()
        try {
          return await origin.ask(inputMethod, inputParams, AbortSignal.any([inputSignal, signal]), upstreamRequestId)
        } finally {
          let requeued = false
          // A timeout goes to the upstream instead of the answer (the call ends), and to the client (see below).
          await claim?.unpark(signal, () => {
            requeued = true
            origin.queued?.(slots.limitFor(principal))
          }, slotWait).catch((err: unknown) => {
            if (err instanceof GatewayError && err.code === 'GW_ERR_UPSTREAM_SLOT_TIMEOUT') slotTimedOut ??= err
            throw err
          })
          if (requeued) await origin.sent?.()
        }
      },
      notify: (notification, notificationParams) => origin.notify(notification, notificationParams),
      upstreamTaskStatus: (status) => origin.upstreamTaskStatus?.(status),
      offersOutliveCall: origin.offersOutliveCall === true,
    }
    const metrics = this.#metrics
    const started = performance.now()
    let outcome = 'ok'
    // Upstream work another process started on a session of its own goes on on that session; sessionless work (a
    // 2026-07-28 upstream's task) on the client's.
    const plan: RequestPlan = {
      method,
      target: target.target,
      client,
      purpose: 'call',
      signal,
      authorization: origin.authorization,
      trace: origin.trace,
      traceName: typeof params.name === 'string' ? params.name : undefined,
      rejoin: origin.upstreamTask?.existing,
      admit: async () => {
        let freeSlot = slots.tryTake(principal)
        if (freeSlot === undefined) {
          origin.queued?.(slots.limitFor(principal))
          const queuedAt = performance.now()
          freeSlot = await slots.take(principal, { signal, timeoutMs: slotWait })
          metrics?.queueWait(upstream.name, (performance.now() - queuedAt) / 1000)
        }
        claim = slots.claim(principal, freeSlot)
      },
    }
    try {
      return await requestUpstream(upstream, plan, async (request) => {
        const session = request.session
        const call = session.calls.begin(client.key, sink, origin.maxResultBytes)
        session.pristine = false
        try {
          // Awaited: a task records that its call leaves the gateway before the request is sent.
          await origin.sent?.()
          const { requestState: _state, inputResponses: _responses, ...forwarded } = withoutProgressToken(params)
          // Every call asks for progress: its token also ties what the upstream asks during the call to it.
          const { timeout, authorization, trace } = request.options
          const result = await callUpstream(session, call, method, { ...forwarded, name: target.target }, target.native, {
            timeout,
            signal,
            onprogress: (progress) => origin.progress?.(progress),
            authorization,
            trace,
          }, origin.upstreamTask)
          if (slotTimedOut !== undefined) throw slotTimedOut
          if (result.isError === true) outcome = 'tool_error'
          return result
        } finally {
          session.calls.end(call)
        }
      })
    } catch (err) {
      const mapped = slotTimedOut ?? err
      if (metrics !== undefined) {
        outcome = errorClass(mapped)
        metrics.upstreamFailed(upstream.name, mapped)
      }
      throw mapped
    } finally {
      claim?.release()
      // The tool name comes from the upstream's catalog (the route), never from the client: a bounded label.
      if (method === 'tools/call') metrics?.upstreamCall(upstream.name, target.target, outcome, (performance.now() - started) / 1000)
    }
  }
}
