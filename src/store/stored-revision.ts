import type { Revision } from '../wire/versions.ts'
import type { TaskRecord } from './types.ts'

/**
 * Until revisions named them, the stores held a task's era (and its resume address's) as `legacy` (the
 * 2025-11-25 family) and `modern` (2026-07-28). Every store rewrites its records once when it starts on them
 * (a migration of each SQL schema; a pass over the task hashes on Redis), and the readers of the stores that
 * several processes share also take the previous names: a process of the previous version still running
 * during a rolling deploy writes them after the migration ran.
 */
export const PREVIOUS_NAMES: Readonly<Record<'legacy' | 'modern', Revision>> = Object.freeze({ legacy: '2025-11-25', modern: '2026-07-28' })

/** A stored era as the revision it names: the previous names are read as the revisions they meant. */
export function revisionOf (stored: string): Revision {
  // Comparisons, not a lookup: this runs on every read of a task (a lookup would also find 'constructor').
  if (stored === 'legacy') return PREVIOUS_NAMES.legacy
  if (stored === 'modern') return PREVIOUS_NAMES.modern
  return stored as Revision
}

/** A task just read from a store (a fresh object, changed in place) with its eras read as revisions. */
export function withRevisions (task: TaskRecord): TaskRecord {
  task.era = revisionOf(task.era)
  const resume = task.resume
  if (resume !== null && resume.kind !== 'unsent') resume.era = revisionOf(resume.era)
  return task
}

/**
 * The JSON text of an object (a task's body, or its resume address) with its own `era` of a previous name
 * replaced by the revision, and nothing else of the text changed (no parse and write again, which could round
 * numbers the client sent); undefined when it has none to replace. The pair `"era":"legacy"` may also be a key
 * of a nested object (the client's arguments): each place it is found is tried until the object's own is.
 */
export function rewrittenEra (json: string): string | undefined {
  const own = (JSON.parse(json) as { era?: unknown }).era
  if (own !== 'legacy' && own !== 'modern') return undefined
  const found = `"era":${JSON.stringify(own)}`
  const replaced = `"era":${JSON.stringify(PREVIOUS_NAMES[own])}`
  for (let at = json.indexOf(found); at !== -1; at = json.indexOf(found, at + 1)) {
    const candidate = json.slice(0, at) + replaced + json.slice(at + found.length)
    if ((JSON.parse(candidate) as { era?: unknown }).era === PREVIOUS_NAMES[own]) return candidate
  }
  return undefined
}
