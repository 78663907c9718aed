import { z } from 'zod'

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }
const SIZE_UNITS: Record<string, number> = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 }

/** Largest delay a Node timer accepts (about 24.8 days); longer ones would fire at once. */
export const MAX_TIMER_MS = 2 ** 31 - 1

export function parseDuration (text: string): number | undefined {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$/i.exec(text)
  if (!match) return undefined
  return Math.round(Number(match[1]) * (DURATION_UNITS[match[2]!.toLowerCase()] ?? Number.NaN))
}

export function parseSize (text: string): number | undefined {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)\s*$/i.exec(text)
  if (!match) return undefined
  return Math.round(Number(match[1]) * (SIZE_UNITS[match[2]!.toLowerCase()] ?? Number.NaN))
}

/** Milliseconds as the largest unit that writes them exactly (`60s`, `1500ms`, `2h`). */
export function formatDuration (ms: number): string {
  for (const unit of ['d', 'h', 'm', 's'] as const) {
    const size = DURATION_UNITS[unit]!
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`
  }
  return `${ms}ms`
}

/** What to write instead of a bare number of a duration: it used to mean milliseconds, most who write one mean seconds. */
function unitHint (value: number): string {
  return `a duration needs a unit: write ${value}s or ${value * 1000}ms (a bare ${value} meant ${value} milliseconds; write ${value}ms to keep that)`
}

/** A duration written as `500ms`, `30s`, `10m`, `1h` or `2d` (a bare `0` too: it is the same in every unit); parsed to milliseconds. */
export function duration (description: string) {
  return z.union([z.number(), z.string()])
    .transform((value, ctx) => {
      if (typeof value === 'number' && value !== 0) {
        ctx.addIssue({ code: 'custom', message: Number.isFinite(value) && value > 0 ? unitHint(value) : `'${value}' is not a duration; write e.g. 500ms, 30s, 10m, 1h or 2d` })
        return z.NEVER
      }
      const ms = typeof value === 'number' ? value : parseDuration(value)
      if (ms === undefined) {
        ctx.addIssue({ code: 'custom', message: `'${String(value)}' is not a duration; write e.g. 500ms, 30s, 10m, 1h or 2d` })
        return z.NEVER
      }
      if (ms > MAX_TIMER_MS) {
        ctx.addIssue({ code: 'custom', message: `'${String(value)}' is longer than the maximum of 24d` })
        return z.NEVER
      }
      return ms
    })
    .describe(`${description} (duration: 500ms, 30s, 10m, 1h, 2d, or 0)`)
}

/** A size written as `512kb`, `4mb` or a number of bytes; parsed to bytes. */
export function size (description: string) {
  return z.union([z.number().int().positive(), z.string()])
    .transform((value, ctx) => {
      const bytes = typeof value === 'number' ? value : parseSize(value)
      if (bytes === undefined || bytes <= 0) {
        ctx.addIssue({ code: 'custom', message: `'${String(value)}' is not a size; write e.g. 512kb, 4mb or a number of bytes` })
        return z.NEVER
      }
      return bytes
    })
    .describe(`${description} (size: 512kb, 4mb, or bytes)`)
}
