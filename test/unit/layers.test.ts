// The floors of src/ are listed once (eslint.layers.js), enforced by lint, and drawn in docs/architecture.md:
// these tests keep the three the same and make sure no folder escapes the rule.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { ESLint } from 'eslint'
import { describe, expect, it } from 'vitest'
import { APART, LAYERS } from '../../eslint.layers.js'

const root = join(import.meta.dirname, '..', '..')

function documentedFloors (): Array<{ floor: number, places: string[] }> {
  const text = readFileSync(join(root, 'docs', 'architecture.md'), 'utf8')
  const section = text.slice(text.indexOf('## The layers'), text.indexOf('\n## ', text.indexOf('## The layers') + 1))
  return [...section.matchAll(/^\| (\d+) \| ([^|]+) \|/gm)].map(([, floor, places]) => ({
    floor: Number(floor),
    places: [...places!.matchAll(/`src\/([^`]+?)\/?`/g)].map(([, place]) => place!),
  }))
}

/** The places of src/ a floor can name: its top-level folders and files, with protocol/ split by era. */
function placesOfSrc (): string[] {
  const src = join(root, 'src')
  return readdirSync(src, { withFileTypes: true }).flatMap((entry) => {
    if (entry.name === 'protocol') return readdirSync(join(src, 'protocol')).map((era) => `protocol/${era}`)
    return [entry.name]
  })
}

describe('the layers of src/', () => {
  it('docs/architecture.md draws the floors eslint.layers.js lists, top floor first', () => {
    const expected = LAYERS.map((places, floor) => ({ floor, places: [...places] })).reverse()
    expect(documentedFloors()).toEqual(expected)
  })

  it('puts every folder and file of src/ on exactly one floor, or apart', () => {
    const listed = [...LAYERS.flat(), ...APART]
    for (const place of placesOfSrc()) {
      expect(listed.filter((entry) => entry === place), `src/${place}`).toHaveLength(1)
    }
  })

  it('fails lint for an import that points up or sideways, and passes one that points down', async () => {
    const eslint = new ESLint({ cwd: root })
    const lint = async (file: string, code: string): Promise<string[]> => {
      const [result] = await eslint.lintText(code, { filePath: join(root, file) })
      return result!.messages.map((message) => message.ruleId ?? message.message)
    }
    const up = "import type { LegacyEndpoint } from '../protocol/2025-11-25/endpoint.ts'\nexport type X = LegacyEndpoint\n"
    expect(await lint('src/store/probe.ts', up)).toContain('import-x/no-restricted-paths')
    const sideways = "import type { ModernEndpoint } from '../2026-07-28/endpoint.ts'\nexport type X = ModernEndpoint\n"
    expect(await lint('src/protocol/2025-11-25/probe.ts', sideways)).toContain('import-x/no-restricted-paths')
    const down = "import type { TaskStatus } from '../wire/task-state.ts'\nexport type X = TaskStatus\n"
    expect(await lint('src/store/probe.ts', down)).toEqual([])
  }, 60_000)
})
