// Arguments for every listed tool: valid ones made from the tool's input schema (or taken from the server's own
// table where a made-up value would not do: a path inside the server's directory, a date, a URL the server can
// read without a network), and invalid ones that break the schema.

type Json = Record<string, unknown>

/** A value that satisfies `schema` (the JSON Schema subset the servers under test use). */
export function sampleValue (schema: unknown, name = 'value'): unknown {
  const s = (schema ?? {}) as Json
  if ('const' in s) return s.const
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0]
  if ('default' in s) return s.default
  const union = (s.anyOf ?? s.oneOf) as unknown[] | undefined
  if (Array.isArray(union) && union.length > 0) return sampleValue(union[0], name)
  const type = Array.isArray(s.type) ? s.type[0] : s.type
  switch (type) {
    case 'string': return typeof s.minLength === 'number' && s.minLength > name.length ? name.padEnd(s.minLength, 'x') : name
    case 'integer':
    case 'number': return typeof s.minimum === 'number' ? s.minimum : 1
    case 'boolean': return false
    case 'null': return null
    case 'array': {
      const count = typeof s.minItems === 'number' ? s.minItems : 1
      return Array.from({ length: count }, () => sampleValue(s.items, name))
    }
    case 'object':
    case undefined: return sampleObject(s)
    default: return name
  }
}

/** The required properties of an object schema, each with a sample value. */
export function sampleObject (schema: Json): Json {
  const properties = (schema.properties ?? {}) as Record<string, unknown>
  const required = (schema.required ?? []) as string[]
  return Object.fromEntries(required.map((key) => [key, sampleValue(properties[key], key)]))
}

/**
 * Arguments that break the schema: a required property left out, or else a property given a value of the wrong
 * type, or else (a schema that accepts anything) an object where a number is not expected.
 */
export function invalidArguments (schema: Json): Json {
  const required = (schema.required ?? []) as string[]
  if (required.length > 0) {
    const valid = sampleObject(schema)
    delete valid[required[0] as string]
    return valid
  }
  const properties = Object.entries((schema.properties ?? {}) as Record<string, Json>)
  const typed = properties.find(([, p]) => typeof p.type === 'string' && p.type !== 'object')
  if (typed !== undefined) return { [typed[0]]: typed[1].type === 'string' ? { not: 'a string' } : 'not a number or boolean' }
  return { unexpected: { nested: true } }
}
