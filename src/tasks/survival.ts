import type { TaskSupport } from '../config/schema.ts'
import type { Upstream } from '../upstream/upstream.ts'
import { upstreamTaskPlan } from './upstream-task-link.ts'

/**
 * What becomes of a running task of a tool when its gateway process stops (a deploy, a crash): `resumable` (the
 * upstream runs it as its own task, which another process, or the next one on the store, reaches again),
 * `rerun` (an idempotent tool, run again from the start) or `lost` (failed: "gateway process lost during
 * execution", or "gateway restarted during execution").
 */
export type Survival = 'resumable' | 'rerun' | 'lost'

/** One upstream's answer to "what does a restart cost": its tools by what becomes of their running tasks. */
export interface UpstreamSurvival {
  upstream: string
  transport: string
  upstreamTasks: 'auto' | 'off'
  /** Tools whose running tasks are resumed (their upstream's own tasks, recorded where they run). */
  resumable: string[]
  /** Idempotent tools (toolSettings) whose running tasks run again. */
  rerun: string[]
  /** What becomes of a running task of any other tool. */
  others: 'lost'
  /** Why tools the upstream runs as tasks are not resumable, when they are not. */
  note?: string
}

export function survivalOf (upstream: Upstream, tool: string, support: TaskSupport | undefined): Survival {
  if (upstreamTaskPlan(upstream, tool, support).resumable) return 'resumable'
  return upstream.config.toolSettings[tool]?.idempotent === true ? 'rerun' : 'lost'
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
  const note = nativeTools.size === 0
    ? undefined
    : config.upstreamTasks === 'off'
      ? 'upstreamTasks is off: its own tasks are not resumed'
      : config.transport !== 'streamable-http'
        ? `a ${config.transport} upstream session ends with the gateway process that opened it: its own tasks cannot be resumed`
        : undefined
  return { upstream: upstream.name, transport: config.transport, upstreamTasks: config.upstreamTasks, resumable, rerun, others: 'lost', ...(note !== undefined && { note }) }
}
