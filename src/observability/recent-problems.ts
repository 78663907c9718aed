import { GatewayError, RpcError } from '../errors.ts'

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

  constructor (size = DEFAULT_RECENT_PROBLEMS) {
    this.#size = size
  }

  record (kind: Problem['kind'], source: string, err: unknown): void {
    const code = problemCode(err)
    const message = (err instanceof Error ? err.message : String(err)).slice(0, MAX_MESSAGE)
    const problem: Problem = { at: Date.now(), kind, code, source, message }
    this.#ring.push(problem)
    if (this.#ring.length > this.#size) this.#ring.shift()
    const key = `${kind}\n${code}\n${source}`
    const count = this.#counts.get(key)
    if (count === undefined) this.#counts.set(key, { kind, code, source, count: 1 })
    else count.count++
    for (const listener of this.#listeners) listener(problem)
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
