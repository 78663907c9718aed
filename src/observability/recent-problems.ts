import { GatewayError, RpcError } from '../errors.ts'
import { shownPrincipal } from './logger.ts'

/** A refusal by a limit, or a failure of an upstream call or a store operation, as the dashboard lists it. */
export interface Problem {
  /** Epoch milliseconds. */
  at: number
  kind: 'refusal' | 'error'
  /** The gateway error code (GW_ERR_…), or RPC_ERROR for a JSON-RPC error an upstream answered. */
  code: string
  /** What refused or failed: the limit's option, `upstream <name>` or `store <operation>`. */
  source: string
  message: string
  /**
   * Who made the request refused or failed, once its answer named them: the principal as logs show it (a session
   * without auth by its fingerprint, `anonymous:sha256:<12 hex>`); absent when the request had none yet (refused
   * before authentication) or the problem belongs to no request.
   */
  principal?: string
  /** The client address of that request (server.trustProxy applied). */
  address?: string
}

/** Who made a request, as its answer knows them. */
export interface Requester {
  principal: string | undefined
  address: string | undefined
}

/** How often a (kind, code, source) happened since the process started. */
export interface ProblemCount {
  kind: Problem['kind']
  code: string
  source: string
  count: number
}

export interface ProblemsSnapshot {
  counts: ProblemCount[]
  /** Newest first. */
  recent: Problem[]
}

/** Problems kept for the dashboard: the last ones, with their messages. */
export const DEFAULT_RECENT_PROBLEMS = 50
/** Longest message kept (an upstream's error message can be long). */
const MAX_MESSAGE = 500

export function problemCode (err: unknown): string {
  if (err instanceof GatewayError) return err.code
  return err instanceof RpcError ? 'RPC_ERROR' : 'INTERNAL'
}

/**
 * The refusals and errors of this process: a ring of the most recent ones and a count per kind, code and
 * source since it started (a bounded set: error codes, limit options, upstream names, store operations).
 * Listeners hear of each new problem; nothing is stored or shared with other processes.
 */
export class RecentProblems {
  readonly #size: number
  readonly #ring: Problem[] = []
  readonly #counts = new Map<string, ProblemCount>()
  readonly #listeners = new Set<(problem: Problem) => void>()
  /** The problem each recorded error became, until the error is answered (see `attribute`). */
  readonly #byError = new WeakMap<object, Problem>()

  constructor (size = DEFAULT_RECENT_PROBLEMS) {
    this.#size = size
  }

  record (kind: Problem['kind'], source: string, err: unknown): void {
    const code = problemCode(err)
    const message = (err instanceof Error ? err.message : String(err)).slice(0, MAX_MESSAGE)
    const problem: Problem = { at: Date.now(), kind, code, source, message }
    this.#ring.push(problem)
    if (this.#ring.length > this.#size) this.#ring.shift()
    if (typeof err === 'object' && err !== null) this.#byError.set(err, problem)
    const key = `${kind}\n${code}\n${source}`
    const count = this.#counts.get(key)
    if (count === undefined) this.#counts.set(key, { kind, code, source, count: 1 })
    else count.count++
    for (const listener of this.#listeners) listener(problem)
  }

  /**
   * Names who made the request that `err` refused or failed, where the request is answered (the problem was
   * recorded where the limit or the failure was met, which knows no request). Listeners hear of it with the
   * next snapshot; an error recorded as no problem is left alone.
   */
  attribute (err: unknown, who: Requester): void {
    if (typeof err !== 'object' || err === null) return
    const problem = this.#byError.get(err)
    if (problem === undefined) return
    this.#byError.delete(err)
    if (who.principal !== undefined) problem.principal = shownPrincipal(who.principal)
    if (who.address !== undefined) problem.address = who.address
  }

  snapshot (): ProblemsSnapshot {
    return {
      counts: [...this.#counts.values()].map((count) => ({ ...count })).sort((a, b) => b.count - a.count),
      recent: this.#ring.toReversed(),
    }
  }

  /** Calls `listener` for each new problem; returns the function that stops it. */
  listen (listener: (problem: Problem) => void): () => void {
    this.#listeners.add(listener)
    return () => { this.#listeners.delete(listener) }
  }
}
