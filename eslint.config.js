import neostandard from 'neostandard'

export default [
  ...neostandard({ ts: true, ignores: ['dist/**', 'node_modules/**', 'data/**', 'coverage/**'] }),
  {
    files: ['src/**/*.ts'],
    ignores: ['src/demo/**'],
    rules: { 'no-console': 'error' },
  },
]
