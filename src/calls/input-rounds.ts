import type { JsonObject } from '../wire/jsonrpc.ts'
import { isInputMethod } from '../upstream/call-attribution.ts'
import type { InflightCall } from '../upstream/inflight-call.ts'
import type { SessionRequestOptions, UpstreamSession } from '../upstream/upstream-session.ts'

/** Input rounds one call of a 2026-07-28 upstream may take before the gateway gives up on it. */
const MAX_INPUT_ROUNDS = 64

/** What each request of a call is sent with (its UpstreamRequest's options, and the call's progress handler). */
export type CallOptions = Omit<SessionRequestOptions, 'call'> & { signal: AbortSignal }

/** The options of an upstream task's requests: without the call's progress handler (an upstream task's progress is not relayed). */
export function withoutProgress (options: CallOptions): Omit<CallOptions, 'onprogress'> {
  const { onprogress: _progress, ...plain } = options
  return plain
}

/**
 * Sends `method` for `call`. A 2026-07-28 upstream asks for input by answering `input_required`: each input
 * request goes to the call's client, and the request is sent again with the answers and the upstream's
 * requestState, until the upstream answers for good. What goes wrong is said of the upstream by the request
 * path (GW_ERR_UPSTREAM_FAILED, naming it).
 */
export async function withInputRounds (
  session: UpstreamSession,
  call: InflightCall,
  method: string,
  params: JsonObject,
  options: CallOptions,
): Promise<JsonObject> {
  // Only a 2026-07-28 result can ask for input; in the legacy era `resultType` is just another field.
  if (session.client.getProtocolEra?.() !== 'modern') return await session.request(method, params, Object.assign({}, options, { call }))
  let result = await session.request(method, params, Object.assign({}, options, { call, allowInputRequired: true }))
  for (let round = 1; result.resultType === 'input_required'; round++) {
    if (round > MAX_INPUT_ROUNDS) throw new Error(`it asked for input ${MAX_INPUT_ROUNDS} times in a row`)
    const requests = (result.inputRequests ?? {}) as Record<string, JsonObject>
    const responses: JsonObject = {}
    await Promise.all(Object.entries(requests).map(async ([key, request]) => {
      const inputMethod = String(request.method)
      if (!isInputMethod(inputMethod)) throw new Error(`it asked for '${inputMethod}', which is not an input request`)
      responses[key] = await call.ask(inputMethod, (request.params ?? {}) as JsonObject, options.signal)
    }))
    const retry: JsonObject = { ...params, inputResponses: responses }
    if (result.requestState !== undefined) retry.requestState = result.requestState
    result = await session.request(method, retry, { ...options, call, allowInputRequired: true })
  }
  return result
}
