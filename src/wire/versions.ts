import { readFileSync } from 'node:fs'

/** Protocol revisions of the legacy (initialize + sessions) era, newest first. */
export const LEGACY_PROTOCOL_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'] as const
export const LATEST_LEGACY_VERSION = LEGACY_PROTOCOL_VERSIONS[0]
/**
 * A protocol revision as the gateway records and reports it (a task's, an upstream session's, a request's): the
 * 2025-11-25 revision stands for its whole family (initialize and sessions, every revision of
 * LEGACY_PROTOCOL_VERSIONS), `2026-07-28` for the stateless revision. Named by revision, not by age: the stores
 * held `legacy` and `modern` before, which they still read (src/store/stored-revision.ts).
 */
export const REVISIONS = ['2025-11-25', '2026-07-28'] as const
export type Revision = typeof REVISIONS[number]

/** What a request without an MCP-Protocol-Version header is assumed to speak (spec 2025-06-18). */
export const DEFAULT_HEADER_VERSION = '2025-03-26'

export function isLegacyVersion (version: string): boolean {
  return (LEGACY_PROTOCOL_VERSIONS as readonly string[]).includes(version)
}

/** Protocol revisions of the modern (per-request envelope) era. */
export const MODERN_PROTOCOL_VERSIONS = ['2026-07-28'] as const
/** The 2026-07-28 `_meta` key of a request's protocol version: its presence makes a message modern. */
export const PROTOCOL_VERSION_KEY = 'io.modelcontextprotocol/protocolVersion'
/** The 2026-07-28 `_meta` key of the capabilities a request's client declares (for that request only). */
export const CLIENT_CAPABILITIES_KEY = 'io.modelcontextprotocol/clientCapabilities'
/** The 2026-07-28 tasks extension, as named among a client's or a server's `capabilities.extensions`. */
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks'

/** The version a server answers to an initialize: the client's if supported, else the latest. */
export function negotiateVersion (requested: unknown): string {
  return typeof requested === 'string' && isLegacyVersion(requested) ? requested : LATEST_LEGACY_VERSION
}

/** Set by the build (scripts/build.ts) to package.json's name and version; undefined when run from src/. */
declare const GATEWAY_PACKAGE: { name: string, version: string } | undefined

/** The package's own name and version: put in by the build, or read once from package.json (two levels above src/wire/). */
const PACKAGE = typeof GATEWAY_PACKAGE === 'object'
  ? GATEWAY_PACKAGE
  : JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { name: string, version: string }

/** How the gateway names itself: to clients as `serverInfo`, to upstreams as `clientInfo`, to tracing as the service. */
export const GATEWAY_INFO: Readonly<{ name: string, version: string }> = Object.freeze({ name: PACKAGE.name, version: PACKAGE.version })
