import neostandard from 'neostandard'

export default [
  ...neostandard({ ts: true, ignores: ['dist/**', 'node_modules/**', 'data/**', 'coverage/**'] }),
  {
    rules: {
      // `void promise` marks a deliberately unawaited promise.
      'no-void': ['error', { allowAsStatement: true }],
      '@stylistic/comma-dangle': ['warn', 'always-multiline'],
    },
  },
  {
    files: ['src/**/*.ts'],
    ignores: ['src/demo/**'],
    rules: { 'no-console': 'error' },
  },
]
