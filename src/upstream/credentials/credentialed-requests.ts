import type { FetchLike } from '@modelcontextprotocol/client'
import type { Dispatcher } from 'undici'
import type { CredentialSubject, UpstreamAuthHeaders, UpstreamCredentials } from './upstream-credentials.ts'

/**
 * Where an upstream's credentials meet its HTTP requests: every request of an upstream session that serves
 * `subject` gets its headers from UpstreamCredentials.headersFor, asked per request (a token refreshed between two
 * requests of one session is picked up; a cached one costs a lookup). An answer of 401 is reported to the
 * credentials (`rejected`) and, when they say a new credential may do better, the request is sent once more
 * with the new headers; else the 401 is the answer.
 */

/** What the Streamable HTTP transport sends its requests with: an undici dispatcher, or one wrapped here. */
export interface UpstreamRequester {
  request (options: Dispatcher.RequestOptions): Promise<Dispatcher.ResponseData>
}

/** The credential's headers replace those of the same name (in any case) that the request carries. */
function withCredential (headers: Dispatcher.RequestOptions['headers'], sent: UpstreamAuthHeaders): Record<string, string> {
  const own = new Set(Object.keys(sent.headers))
  const kept: Record<string, string> = {}
  for (const [name, value] of Object.entries((headers ?? {}) as Record<string, string | string[] | undefined>)) {
    if (value !== undefined && !own.has(name.toLowerCase())) kept[name] = Array.isArray(value) ? value.join(', ') : value
  }
  return { ...kept, ...sent.headers }
}

function firstValue (value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value
}

/** A body that can be sent twice (the transport sends strings); a stream cannot. */
function resendable (payload: unknown): boolean {
  return payload === undefined || payload === null || typeof payload === 'string' || payload instanceof Uint8Array
}

export function credentialedRequester (inner: UpstreamRequester, { credentials, subject }: SessionCredentials): UpstreamRequester {
  return {
    async request (options) {
      const signal = options.signal as AbortSignal | undefined
      const sent = await credentials.headersFor(subject, signal)
      const res = await inner.request({ ...options, headers: withCredential(options.headers, sent) })
      if (res.statusCode !== 401 || !resendable(options.body)) return res
      if (!credentials.rejected(subject, sent, firstValue(res.headers['www-authenticate']))) return res
      await res.body.dump()
      const again = await credentials.headersFor(subject, signal)
      return await inner.request({ ...options, headers: withCredential(options.headers, again) })
    },
  }
}

function fetchHeaders (init: RequestInit | undefined, sent: UpstreamAuthHeaders): Headers {
  const headers = new Headers(init?.headers)
  for (const [name, value] of Object.entries(sent.headers)) headers.set(name, value)
  return headers
}

/** The same for the legacy HTTP+SSE transport, which sends its requests (and opens its stream) with fetch. */
export function credentialedFetch (inner: FetchLike, { credentials, subject }: SessionCredentials): FetchLike {
  return async (url, init) => {
    const signal = init?.signal ?? undefined
    const sent = await credentials.headersFor(subject, signal)
    const res = await inner(url, { ...init, headers: fetchHeaders(init, sent) })
    if (res.status !== 401 || !resendable(init?.body)) return res
    if (!credentials.rejected(subject, sent, res.headers.get('www-authenticate') ?? undefined)) return res
    await res.body?.cancel()
    const again = await credentials.headersFor(subject, signal)
    return await inner(url, { ...init, headers: fetchHeaders(init, again) })
  }
}

/** The credentials an upstream session's requests are sent with, and whom for (see UpstreamSession.open). */
export interface SessionCredentials {
  readonly credentials: UpstreamCredentials
  readonly subject: CredentialSubject
}
