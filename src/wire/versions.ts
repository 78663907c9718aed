/** Protocol revisions of the legacy (initialize + sessions) era, newest first. */
export const LEGACY_PROTOCOL_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'] as const
export const LATEST_LEGACY_VERSION = LEGACY_PROTOCOL_VERSIONS[0]
/** What a request without an MCP-Protocol-Version header is assumed to speak (spec 2025-06-18). */
export const DEFAULT_HEADER_VERSION = '2025-03-26'

export function isLegacyVersion (version: string): boolean {
  return (LEGACY_PROTOCOL_VERSIONS as readonly string[]).includes(version)
}

/** The version a server answers to an initialize: the client's if supported, else the latest. */
export function negotiateVersion (requested: unknown): string {
  return typeof requested === 'string' && isLegacyVersion(requested) ? requested : LATEST_LEGACY_VERSION
}

export const GATEWAY_INFO = { name: 'mcp-task-gateway', version: '0.1.0' } as const
