import type { TaskSupport } from '../config/schema.ts'
import type { Upstream } from '../upstream/upstream.ts'
import { upstreamTaskPlan } from './upstream-task-link.ts'

/**
 * What becomes of a running task of a tool when its gateway process stops (a deploy, a crash): `resumable` (the
 * upstream runs it as its own task, which another process, or the next one on the store, reaches again),
 * `replayable` (a plain call on an upstream whose call streams another process can replay: resumed when the
 * upstream gives its stream event ids), `rerun` (an idempotent tool, run again from the start) or `lost` (failed:
 * "gateway process lost during execution", or "gateway restarted during execution").
 */
export type Survival = 'resumable' | 'replayable' | 'rerun' | 'lost'

/** What becomes of the running tasks of an upstream's other tools (neither its own tasks nor idempotent). */
export type OthersSurvival =
  | 'resumed if the upstream replays the call stream (SSE event ids), else lost'
  | 'resumed if the upstream runs the call as its own task (2026-07-28 tasks extension), else lost'
  | 'lost'

/**
 * What becomes of a task still waiting for a call slot (its call never sent, marked unsent in the store): whatever
 * the tool and the upstream, the process that takes it over starts it.
 */
export const QUEUED_SURVIVAL = 'started by the process that takes them over: their calls were never sent upstream'

/** One upstream's answer to "what does a restart cost": its tools by what becomes of their running tasks. */
export interface UpstreamSurvival {
  upstream: string
  transport: string
  resume: 'auto' | 'off'
  /** Tools whose running tasks are resumed (their upstream's own tasks, recorded where they run). */
  resumable: string[]
  /** Idempotent tools (toolSettings) whose running tasks run again. */
  rerun: string[]
  /** What becomes of a running task of any other tool. */
  others: OthersSurvival
  /**
   * On a 2026-07-28 upstream whose calls may run as its own tasks: what becomes of a 2026-07-28 client's call that
   * became a task after the decision window (tasks.decide `after`), which is not offered to the upstream as a task
   * up front (an upstream may make every call that declares the extension a task, and a quick call would no longer
   * be answered directly).
   */
  afterWindow?: 'resumed if the upstream runs the tool only as its own task, else lost'
  /** What becomes of a task of any tool still waiting for a call slot (maxConcurrentCalls). */
  queued: typeof QUEUED_SURVIVAL
  /** Why its running tasks are not resumed, when they are not. */
  note?: string
}

export function survivalOf (upstream: Upstream, tool: string, support: TaskSupport | undefined): Survival {
  const plan = upstreamTaskPlan(upstream, tool, support)
  if (plan.native && plan.resumable) return 'resumable'
  if (upstream.config.toolSettings[tool]?.idempotent === true) return 'rerun'
  return plan.resumable ? 'replayable' : 'lost'
}

/**
 * The survival of every tool an upstream is known to have: the tools it runs as its own tasks (as its sessions
 * listed them so far) and those its configuration marks idempotent.
 */
export function upstreamSurvival (upstream: Upstream, nativeTools: ReadonlyMap<string, TaskSupport>): UpstreamSurvival {
  const config = upstream.config
  const tools = new Set([...nativeTools.keys(), ...Object.keys(config.toolSettings)])
  const resumable: string[] = []
  const rerun: string[] = []
  for (const tool of [...tools].sort()) {
    const survival = survivalOf(upstream, tool, nativeTools.get(tool))
    if (survival === 'resumable') resumable.push(tool)
    else if (survival === 'rerun') rerun.push(tool)
  }
  const note = config.resume === 'off'
    ? 'resume is off: running tasks of this upstream are not resumed'
    : config.transport !== 'streamable-http'
      ? `a ${config.transport} upstream session ends with the gateway process that opened it: its running calls cannot be resumed`
      : undefined
  const others: OthersSurvival = config.resume !== 'auto' || config.transport !== 'streamable-http'
    ? 'lost'
    : upstream.era !== '2026-07-28'
      ? 'resumed if the upstream replays the call stream (SSE event ids), else lost'
      : upstream.offersTasks ? 'resumed if the upstream runs the call as its own task (2026-07-28 tasks extension), else lost' : 'lost'
  const survival: UpstreamSurvival = {
    upstream: upstream.name, transport: config.transport, resume: config.resume, resumable, rerun, others, queued: QUEUED_SURVIVAL,
  }
  if (note !== undefined) survival.note = note
  if (others === 'resumed if the upstream runs the call as its own task (2026-07-28 tasks extension), else lost') {
    survival.afterWindow = 'resumed if the upstream runs the tool only as its own task, else lost'
  }
  return survival
}
