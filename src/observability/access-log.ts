import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from 'fastify'
import { accessNoteOf } from '../wire/access-notes.ts'

/** The paths of the health probes, on the MCP listener. */
export const PROBE_PATHS = ['/healthz', '/readyz'] as const

/** How long a credential fingerprint is: the first 12 hex digits of the credential's SHA-256, as session fingerprints. */
const FINGERPRINT_DIGITS = 12

/** What an access line shows of a credential: `sha256:` and the first 12 lower-case hex digits of its SHA-256. */
export function credentialFingerprint (sha256: string): string {
  return `sha256:${sha256.slice(0, FINGERPRINT_DIGITS).toLowerCase()}`
}

/** The levels at which info lines are written (the gateway's logger has pino's levels only). */
const INFO_WRITTEN = new Set(['trace', 'debug', 'info'])

function logsInfo (log: FastifyBaseLogger): boolean {
  return INFO_WRITTEN.has(log.level)
}

function pathOf (url: string): string {
  const query = url.indexOf('?')
  return query === -1 ? url : url.slice(0, query)
}

/**
 * The access log of a listener: Fastify's `incoming request` and `request completed` lines, the second one
 * also naming the client address (`request.ip`, server.trustProxy applied), the principal and the
 * fingerprint of the credential the request authenticated with, and the GW_ERR_* code of the gateway error
 * that answered it (see access-notes.ts). Requests to `quiet` paths (the probes and the metrics scrape,
 * unless logging.probes) write no line at all.
 */
export class AccessLog extends LogController {
  readonly #quiet: ReadonlySet<string>

  constructor (quiet: Iterable<string>) {
    super()
    this.#quiet = new Set(quiet)
  }

  override isLogDisabled (request: FastifyRequest): boolean {
    return this.#quiet.size > 0 && this.#quiet.has(pathOf(request.url))
  }

  override incomingRequest (request: FastifyRequest, reply: FastifyReply): void {
    if (!logsInfo(request.log)) return
    super.incomingRequest(request, reply)
  }

  override requestCompleted (error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    // Below info (warn, the level of many deployments) a request that went well writes nothing: no line to build.
    if (!error && !logsInfo(reply.log)) return
    if (this.isLogDisabled(request)) return
    const note = accessNoteOf(reply.raw)
    const line: Record<string, unknown> = { res: reply, responseTime: reply.elapsedTime, remoteAddress: request.ip }
    if (note?.principal !== undefined) line.principal = note.principal
    if (note?.credentialSha256 !== undefined) line.credential = credentialFingerprint(note.credentialSha256)
    if (note?.code !== undefined) line.code = note.code
    if (error) reply.log.error({ ...line, err: error }, 'request errored')
    else reply.log.info(line, 'request completed')
  }
}

/** The access log of a listener that serves `paths` among the probes (kept out unless `logProbes`). */
export function accessLog (logProbes: boolean, paths: readonly string[]): AccessLog {
  return new AccessLog(logProbes ? [] : paths)
}
