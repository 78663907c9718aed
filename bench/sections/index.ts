// Registry of benchmark sections, run in this order. To add one: write bench/sections/<id>.ts
// exporting a `Section` (see bench/lib/types.ts) and list it here. task-create and task-get share three
// gateways (memory, sqlite and redis store) with tasks in flight; task-get closes them, and task-cluster
// and task-memory make sure they are closed before they measure. stdio-peers starts its own front ends,
// one at a time, in front of a stdio server of its own. scale (last) starts its own gateways, one figure at a time.
import type { Section } from '../lib/types.ts'
import { stdioPeersSection } from './stdio-peers.ts'
import { syncCallSection } from './sync-call.ts'
import { taskClusterSection } from './task-cluster.ts'
import { taskCreateSection } from './task-create.ts'
import { taskGetSection } from './task-get.ts'
import { taskMemorySection } from './task-memory.ts'
import { scaleSection } from './scale.ts'
import { metricsCostSection } from './metrics-cost.ts'
import { tracingCostSection } from './tracing-cost.ts'

export const SECTIONS: readonly Section[] = [
  syncCallSection,
  taskCreateSection,
  taskGetSection,
  taskClusterSection,
  taskMemorySection,
  metricsCostSection,
  tracingCostSection,
  stdioPeersSection,
  scaleSection,
]
