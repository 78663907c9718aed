// The normaliser: what may legitimately differ between two runs of the same session, whether through the
// gateway or not, is replaced by a placeholder before items are compared. Nothing else is touched: a difference
// that survives normalisation is the gateway's, or is listed with its reason in allow-list.ts.
//
// - the side's own directory (each side has its own, so the two never share state), as a path or a file URL: `<dir>`;
// - UUIDs (request ids, random names a server makes): `<uuid>`;
// - times of day and dates with a time (ISO 8601, `Date#toString()`, `8:31:07 AM`): `<time>`;
// - a base64 `blob` that decodes to text: the text, normalised the same way, as `base64:<text>`;
// - progress tokens (the client's, counted per connection): `<token>`;
// - object keys are sorted (JSON objects are unordered); arrays keep their order, as servers list in an order of
//   their own and the gateway must keep it.
import { realpathSync } from 'node:fs'
import { pathToFileURL } from 'node:url'

const UUID = /\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi
const TIMESTAMP = /\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?\b/g
/** `Date#toString()`: `Sat Nov 28 2026 08:30:57 GMT+0000 (Coordinated Universal Time)`. */
const DATE_STRING = /\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} \d{2} \d{4} \d{2}:\d{2}:\d{2} GMT[+-]\d{4}(?: \([^)]*\))?/g
/** A time of day as `toLocaleTimeString()` writes it: `8:31:07 AM`. */
const CLOCK = /\b\d{1,2}:\d{2}:\d{2}(?: ?[AP]M)?\b/g

function escape (text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

export class Normaliser {
  readonly #dirs: RegExp

  /** `dirs`: the directories of the side whose items it normalises. */
  constructor (dirs: string[]) {
    const forms = dirs.flatMap((dir) => {
      const real = realpathSync(dir)
      return [dir, real, pathToFileURL(dir).href, pathToFileURL(real).href]
    })
    // Longest first, so a file URL is replaced whole rather than its path within it.
    const unique = [...new Set(forms)].sort((a, b) => b.length - a.length)
    this.#dirs = new RegExp(unique.map(escape).join('|'), 'g')
  }

  string (text: string): string {
    return text.replace(this.#dirs, '<dir>').replace(UUID, '<uuid>').replace(DATE_STRING, '<time>').replace(TIMESTAMP, '<time>').replace(CLOCK, '<time>')
  }

  value (value: unknown): unknown {
    if (typeof value === 'string') return this.string(value)
    if (Array.isArray(value)) return value.map((v) => this.value(v))
    if (value === null || typeof value !== 'object') return value
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([k, v]) => [this.string(k), k === 'progressToken' ? '<token>' : k === 'blob' && typeof v === 'string' ? this.blob(v) : this.value(v)])
    return Object.fromEntries(entries)
  }

  /** A base64 blob that decodes to printable text is compared as that text (it may hold a time); other blobs as they are. */
  blob (base64: string): string {
    const text = Buffer.from(base64, 'base64').toString('utf8')
    return /^[\t\n\r\x20-\x7e]*$/.test(text) && Buffer.from(text, 'utf8').toString('base64') === base64 ? `base64:${this.string(text)}` : base64
  }

  /** The canonical text of a value, what two items are compared by. */
  text (value: unknown): string {
    return JSON.stringify(this.value(value)) ?? 'undefined'
  }
}
