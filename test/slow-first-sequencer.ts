import { relative } from 'node:path'
import { BaseSequencer, type TestSpecification } from 'vitest/node'

/**
 * Files known to take long, longest first (relative to the repository root). Without results of an earlier run
 * (a fresh checkout, CI) vitest starts the largest files first, and a short file with a long run, such as a
 * contract suite that calls a few suite functions over a slow backend, would start last and leave the other
 * workers idle while it runs. Measured on a loaded 2-core machine: wall seconds of each file alone.
 */
export const SLOW_FILES: readonly string[] = [
  'test/contract/stores-postgres.test.ts', // 87 tests, a PostgreSQL store opened for each: 130–270 s
  'test/contract/stores-in-process.test.ts', // 179 tests, a SQLite file with its checkpointer for half of them: 100–170 s
  'test/contract/stores-redis.test.ts', // 90 tests: 40–120 s
]

/**
 * vitest's order (failed files first, then the longest by the last run's durations, else the largest), with
 * SLOW_FILES moved ahead of the rest so that they start at once.
 */
export class SlowFirstSequencer extends BaseSequencer {
  override async sort (files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files)
    const root = this.ctx.config.root
    const rank = (file: TestSpecification): number => {
      const at = SLOW_FILES.indexOf(relative(root, file.moduleId).replaceAll('\\', '/'))
      return at === -1 ? SLOW_FILES.length : at
    }
    // Array.prototype.sort is stable: the other files keep vitest's order.
    return sorted.sort((a, b) => rank(a) - rank(b))
  }
}
