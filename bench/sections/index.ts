// Registry of benchmark sections, run in this order. To add one (e.g. task creation latency with
// 1,000 tasks in flight, tasks/get per second, memory per in-flight task): write
// bench/sections/<id>.ts exporting a `Section` (see bench/lib/types.ts) and list it here.
import type { Section } from '../lib/types.ts'
import { syncCallSection } from './sync-call.ts'

export const SECTIONS: readonly Section[] = [
  syncCallSection,
]
