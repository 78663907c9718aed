import type { Route } from '../catalog/catalog-view.ts'
import type { CallTarget } from '../calls/call-engine.ts'
import type { UpstreamTaskHooks } from '../calls/upstream-call.ts'
import type { TaskResume } from '../store/types.ts'
import { settled } from '../observability/ignored.ts'
import { upstreamTaskPlan } from './upstream-task-link.ts'

/**
 * Where the upstream work of a held 2026-07-28 call runs (the upstream's own task, or a plain call's replayable
 * stream), learnt while its client still waits and recorded once the call becomes a task (TaskRunner.adopt). The
 * call is made the way a task's call is, so that a call that becomes a task after the decision window is resumed
 * by another process exactly like one that was a task from the start.
 */
export class HeldTaskLink {
  readonly hooks: UpstreamTaskHooks
  #known: TaskResume | undefined
  #record: ((resume: TaskResume) => Promise<void>) | undefined
  /** The writes of what was learnt, in order. */
  #writes = Promise.resolve()

  constructor (resumable: boolean) {
    this.hooks = {
      resumable,
      held: true,
      created: async (upstreamTaskId, address) => {
        if (address !== undefined) await this.#learn({ kind: 'native', upstreamTaskId, ...address })
      },
      streamed: (resumptionToken, address) => { void this.#learn({ kind: 'stream', resumptionToken, ...address }) },
    }
  }

  /**
   * The call became a task: what is known already is recorded now (the promise settles once it is written), and
   * what is learnt later is recorded as it comes.
   */
  async attach (record: (resume: TaskResume) => Promise<void>): Promise<void> {
    this.#record = record
    if (this.#known !== undefined) await this.#write(this.#known)
  }

  async #learn (resume: TaskResume): Promise<void> {
    this.#known = resume
    // Not a task yet: kept for attach. A task's call waits for the write before it waits for the upstream task.
    if (this.#record !== undefined) await this.#write(resume)
  }

  async #write (resume: TaskResume): Promise<void> {
    const record = this.#record!
    const write = this.#writes.then(async () => { await record(resume) })
    // The next write waits for this one either way; this one's failure reaches the awaiter below.
    this.#writes = settled(write)
    await write
  }
}

/**
 * How a 2026-07-28 call that may become a task is made: as the task's call would be (the upstream's own task when
 * the upstream runs the tool as one and it may be resumed; hooks that learn where the work runs when it may be
 * reached again from another process). Without a link (resume off, a stdio or SSE upstream) it is a plain call.
 */
export function heldCallPlan (route: Route): { target: CallTarget, link: HeldTaskLink | undefined } {
  const plan = upstreamTaskPlan(route.upstream, route.target, route.nativeTaskSupport)
  const target: CallTarget = { upstream: route.upstream, target: route.target, native: plan.native }
  return { target, link: plan.resumable ? new HeldTaskLink(true) : undefined }
}
