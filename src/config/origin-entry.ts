/**
 * What an entry of `server.allowedOrigins` may be: one origin exactly as a browser sends it in the `Origin`
 * header (`https://app.example.com`, `http://localhost:5173`), compared as it is written. What would be
 * accepted but never do what it seems to say is refused at load, with a message, instead of silently:
 * `null` (the Origin of sandboxed frames, `file:` pages and some redirects, which any page can make itself
 * send), wildcards (the list holds origins, not patterns), and entries that are not an origin (a path, a
 * default port, a missing scheme), which would never match.
 */

/** Schemes whose origin the URL parser derives (`scheme://host[:port]`); others are compared as written. */
const WEB_SCHEMES = new Set(['http:', 'https:'])

/** Why `entry` cannot be an entry of `server.allowedOrigins`, or undefined when it can. */
export function originEntryProblem (entry: string): string | undefined {
  const written = entry.toLowerCase().replace(/\/$/, '')
  if (written === 'null') {
    return '\'null\' is refused: it is the Origin of sandboxed frames and file: pages, which any web page can produce, so allowing it would allow every page; list the real origins of your browser clients'
  }
  if (written.includes('*')) {
    return `'${entry}' is refused: wildcards are not supported; list each origin in full (scheme://host[:port], e.g. https://app.example.com)`
  }
  let url: URL
  try {
    url = new URL(written)
  } catch {
    return `'${entry}' is not an origin; write scheme://host[:port], e.g. https://app.example.com`
  }
  const origin = WEB_SCHEMES.has(url.protocol) ? url.origin : /^[a-z][a-z0-9+.-]*:\/\/[^/?#\s@]+$/.test(written) ? written : undefined
  if (origin !== written) {
    return `'${entry}' is not an origin as browsers send it${origin === undefined || origin === 'null' ? '' : ` ('${origin}')`}; write scheme://host[:port] with no path, query or default port`
  }
  return undefined
}
