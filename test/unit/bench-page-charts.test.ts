// `npm run bench:page -- --from <results.json> --out <dir>/benchmarks.md` draws its charts beside the page: the
// main ratios over the runs of the history and each curve of the scale section, as SVG files the page links as
// images; rendering the same results again changes no file. The command itself runs in the first test; the others
// call what it calls (bench/lib/benchmark-page.ts) in the test's process, which is many times faster.
import { execFile } from 'node:child_process'
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { writeBenchmarkPage } from '../../bench/lib/benchmark-page.ts'
import { readSettings } from '../../bench/lib/settings.ts'
import { REPO_ROOT } from '../fixtures/spawn-upstream.ts'
import { byClass, parseSvg, seriesOf } from '../helpers/svg.ts'

const run = promisify(execFile)

const CURVES = [
  {
    id: 'stored-tasks.get',
    title: 'tasks/get p50 by stored tasks',
    x: { label: 'stored tasks', values: [1000, 10000, 100000] },
    y: { label: 'tasks/get p50', unit: 'ms' },
    log: true,
    series: [{ name: 'tasks/get p50 memory', values: [0.21, 0.22, 0.24] }, { name: 'tasks/get p50 sqlite', values: [0.31, null, 0.4] }],
  },
  {
    id: 'sessions',
    title: 'Memory per open session',
    x: { label: 'open sessions', values: [100, 1000, 5000] },
    y: { label: 'memory per session', unit: 'KiB' },
    series: [{ name: 'heap', values: [12.5, 11.25, 11] }],
  },
]

/**
 * A results file as bench/run.ts writes it, cut to what the page reads: the task-get ratios, and the scale curves
 * unless `scale` is false.
 */
function results (date: string, memoryRatio: number, { scale = true, curves = CURVES as unknown[] } = {}): unknown {
  const section = (data: unknown): unknown => ({ title: 'section', tables: [], checks: [], notes: [], data })
  return {
    environment: { date, node: 'v20.19.0', platform: 'linux x64', cpus: 2, cpuModel: 'test CPU', loadavg: [0, 0, 0], git: 'abc1234' },
    settings: readSettings({}),
    checks: [{ section: 'task-get', budget: 'tasks/get throughput, memory store', limit: '≥ 70 %', measured: `${memoryRatio * 100} %`, pass: memoryRatio >= 0.7 }],
    sections: {
      'task-get': section({ ratioLimit: 0.7, memory: { ratioToFloor: memoryRatio }, sqlite: { ratioToFloor: 0.5 } }),
      ...(scale ? { scale: { title: 'Scale', tables: [], checks: [], notes: ['stores filled through the store API'], data: { curves } } } : {}),
    },
  }
}

describe('bench:page charts', () => {
  let dir: string
  let renders = 0
  const page = (): string => join(dir, 'benchmarks.md')
  const charts = (): string => join(dir, 'benchmarks')

  /** Writes `data` as a results file and renders the page from it into the temporary folder: with the command when `command` is set. */
  async function render (data: unknown, { command = false } = {}): Promise<string> {
    const from = join(dir, `results-${++renders}.json`)
    await writeFile(from, JSON.stringify(data))
    try {
      if (!command) return await writeBenchmarkPage(from, page())
      const { stdout } = await run(process.execPath, ['--import', 'tsx', 'bench/page.ts', '--from', from, '--out', page()], { cwd: REPO_ROOT })
      return stdout
    } finally {
      await rm(from)
    }
  }

  /** Every file under the folder, with its content and modification time. */
  async function snapshot (): Promise<Map<string, { content: string, mtimeMs: number }>> {
    const files = new Map<string, { content: string, mtimeMs: number }>()
    for (const name of await readdir(dir, { recursive: true })) {
      const file = join(dir, name)
      if ((await stat(file)).isDirectory()) continue
      files.set(name, { content: await readFile(file, 'utf8'), mtimeMs: (await stat(file)).mtimeMs })
    }
    return files
  }

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'mcp-gw-bench-charts-'))
  })
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  it('draws each scale curve and the ratios over the runs as well-formed SVG files, each linked from the page as an image', async () => {
    const stdout = await render(results('2026-11-28T10:00:00.000Z', 0.72), { command: true })
    expect(stdout).toMatch(/^bench:page: wrote .* 3 charts in .*benchmarks\/, 3 written, 0 removed$/m)
    const files = (await readdir(charts())).sort()
    expect(files).toEqual(['history-tasks-get.svg', 'scale-sessions.svg', 'scale-stored-tasks-get.svg'])
    const markdown = await readFile(page(), 'utf8')
    const images = [...markdown.matchAll(/!\[([^\]]+)\]\(benchmarks\/([^)]+)\)/g)]
    expect(images.map((m) => m[2]).sort()).toEqual(files)
    for (const [, alt] of images) expect(alt).toMatch(/^Line chart: /)
    for (const file of files) parseSvg(await readFile(join(charts(), file), 'utf8'))

    const stored = parseSvg(await readFile(join(charts(), 'scale-stored-tasks-get.svg'), 'utf8'))
    expect(seriesOf(stored)).toEqual([
      { name: 'tasks/get p50 memory', points: [[1000, 0.21], [10000, 0.22], [100000, 0.24]] },
      { name: 'tasks/get p50 sqlite', points: [[1000, 0.31], [100000, 0.4]] },
    ])
    expect(stored.getElementsByTagName('title')[0]!.textContent).toBe('tasks/get p50 by stored tasks')
    // The numbers beside the picture: one row per size, one column per series, — where not measured.
    expect(markdown).toContain('| stored tasks | tasks/get p50 memory | tasks/get p50 sqlite |')
    expect(markdown).toContain('| 10,000 | 0.22 | — |')
    expect(markdown).toContain('- stores filled through the store API')
  })

  it('draws the history oldest run first, one line per ratio, with the budget of the latest run dashed', async () => {
    await render(results('2026-11-28T10:00:00.000Z', 0.72))
    await render(results('2026-11-27T09:00:00.000Z', 0.55))
    const doc = parseSvg(await readFile(join(charts(), 'history-tasks-get.svg'), 'utf8'))
    expect(seriesOf(doc)).toEqual([
      { name: 'tasks/get memory', points: [[0, 0.55], [1, 0.72]] },
      { name: 'tasks/get sqlite', points: [[0, 0.5], [1, 0.5]] },
    ])
    expect(byClass(doc, 'g', 'guide').map((g) => g.getAttribute('data-value'))).toEqual(['0.7'])
    expect(doc.getElementsByTagName('desc')[0]!.textContent).toContain('tasks/get memory: 55 % at 2026-11-27 09:00, 72 % at 2026-11-28 10:00.')
  })

  it('changes no file when the same results are rendered again', async () => {
    await render(results('2026-11-28T10:00:00.000Z', 0.72))
    const before = await snapshot()
    expect(before.size).toBe(5)
    const stdout = await render(results('2026-11-28T10:00:00.000Z', 0.72))
    expect(stdout).toContain('page and history unchanged')
    expect(stdout).toContain('0 written, 0 removed')
    expect(await snapshot()).toEqual(before)
  })

  it('says the scale section was not run when the results have none, and removes the scale charts of an earlier render', async () => {
    await render(results('2026-11-28T10:00:00.000Z', 0.72))
    await render(results('2026-11-28T11:00:00.000Z', 0.71, { scale: false }))
    expect(await readdir(charts())).toEqual(['history-tasks-get.svg'])
    const markdown = await readFile(page(), 'utf8')
    expect(markdown).toContain('The scale section was not run in this run')
    expect(markdown).not.toContain('scale-')
  })

  it('fails on a malformed curve with the path of what is wrong, and leaves the page unwritten', async () => {
    const curves = [{ ...CURVES[0], x: { label: 'stored tasks', values: [1000, '10000', 100000] } }]
    await expect(render(results('2026-11-28T10:00:00.000Z', 0.72, { curves }))).rejects.toThrow(/^sections\.scale\.data\.curves\[0\]\.x\.values\[1\]: .*number/)
    const descending = [{ ...CURVES[1], x: { label: 'open sessions', values: [100, 5000, 1000] } }]
    await expect(render(results('2026-11-28T10:00:00.000Z', 0.72, { curves: descending }))).rejects
      .toThrow("sections.scale.data.curves[0] ('sessions'): x values must ascend: value 2 (1000) is not above value 1 (5000)")
    expect(await readdir(dir)).toEqual([])
  })
})
