/** Allow/deny matching of upstream names with `*` globs; deny wins over allow. */
export interface NameFilter {
  readonly allow: readonly string[]
  readonly deny: readonly string[]
}

function globToRegExp (glob: string): RegExp {
  const escaped = glob.split('*').map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')
  return new RegExp(`^${escaped}$`)
}

export function compileFilter (filter: NameFilter): (name: string) => boolean {
  const allow = filter.allow.map(globToRegExp)
  const deny = filter.deny.map(globToRegExp)
  return (name) => allow.some((re) => re.test(name)) && !deny.some((re) => re.test(name))
}

export const PREFIX_SEPARATOR = '__'

export function exposedName (prefix: string, name: string): string {
  return prefix === '' ? name : `${prefix}${PREFIX_SEPARATOR}${name}`
}
