import type { ServerResponse } from 'node:http'

/**
 * What the access line of an HTTP exchange says beyond its method, path and status: who the request
 * authenticated as and the stable code of the gateway error that answered it. The parts that learn these
 * note them on the exchange's response; the access log reads them when the response ends.
 */
export interface AccessNote {
  /** The authenticated principal; absent with auth off. */
  principal?: string
  /** The SHA-256 (hex) of the credential it authenticated with; the log shows a fingerprint of it. */
  credentialSha256?: string
  /** The GW_ERR_* code of the gateway error that answered the request (an HTTP error, or a JSON-RPC error in a 200). */
  code?: string
}

/**
 * Where a response keeps its note: a property of its own, under a symbol no other code knows. Not a WeakMap keyed
 * by responses: an entry per authenticated request is an ephemeron that every garbage collection has to walk.
 */
const NOTE = Symbol('mcp-task-gateway.access-note')
type Noted = ServerResponse & { [NOTE]?: AccessNote }

function noteOf (res: ServerResponse): AccessNote {
  const noted = res as Noted
  noted[NOTE] ??= {}
  return noted[NOTE]
}

/** The request answered on `res` authenticated as `principal` with the credential whose SHA-256 is `credentialSha256`. */
export function noteCaller (res: ServerResponse, principal: string | undefined, credentialSha256: string | undefined): void {
  if (principal === undefined) return
  const note = noteOf(res)
  note.principal = principal
  if (credentialSha256 !== undefined) note.credentialSha256 = credentialSha256
}

/** The request answered on `res` ended with the gateway error of this code (the first one noted stays). */
export function noteErrorCode (res: ServerResponse, code: string): void {
  const note = noteOf(res)
  note.code ??= code
}

/** What was noted about the exchange answered on `res`. */
export function accessNoteOf (res: ServerResponse): AccessNote | undefined {
  return (res as Noted)[NOTE]
}
