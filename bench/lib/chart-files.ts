// Writing the generated benchmark page and its charts so that rendering the same results again changes no file:
// a file is written only when its content differs, and a chart the page no longer shows is removed.
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { ChartFile } from './history-charts.ts'

/** Writes `content` to `file` unless the file holds exactly that already; true when it wrote. */
export async function writeIfChanged (file: string, content: string): Promise<boolean> {
  const current = await readFile(file, 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined
    throw err
  })
  if (current === content) return false
  await writeFile(file, content)
  return true
}

/**
 * Writes the charts into `dir` (created when missing), each only when changed, and removes the `.svg` files of
 * `dir` that are not among them: the folder holds the charts of the page and nothing else. Returns the names
 * written and removed.
 */
export async function writeCharts (dir: string, charts: readonly ChartFile[]): Promise<{ written: string[], removed: string[] }> {
  await mkdir(dir, { recursive: true })
  const written: string[] = []
  for (const chart of charts) {
    if (await writeIfChanged(join(dir, chart.name), chart.svg)) written.push(chart.name)
  }
  const kept = new Set(charts.map((c) => c.name))
  const removed = (await readdir(dir)).filter((name) => name.endsWith('.svg') && !kept.has(name)).sort()
  for (const name of removed) await rm(join(dir, name))
  return { written, removed }
}
