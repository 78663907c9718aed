import neostandard from 'neostandard'
import { createNodeResolver, importX } from 'eslint-plugin-import-x'
import { layerZones } from './eslint.layers.js'

export default [
  ...neostandard({ ts: true, ignores: ['dist/**', 'node_modules/**', 'data/**', 'coverage/**'] }),
  {
    rules: {
      // `void promise` marks a deliberately unawaited promise.
      'no-void': ['error', { allowAsStatement: true }],
      '@stylistic/comma-dangle': ['warn', 'always-multiline'],
      // Long strings (messages a test or the docs quote), templates, patterns and URLs stay whole.
      '@stylistic/max-len': ['error', {
        code: 140,
        ignoreStrings: true,
        ignoreTemplateLiterals: true,
        ignoreRegExpLiterals: true,
        ignoreUrls: true,
      }],
    },
  },
  {
    files: ['src/**/*.ts'],
    ignores: ['src/demo/**'],
    rules: { 'no-console': 'error' },
  },
  {
    // The folders of src/ are layers (docs/architecture.md): an import never points to a higher one.
    files: ['src/**/*.ts'],
    plugins: { 'import-x': importX },
    settings: { 'import-x/resolver-next': [createNodeResolver({ extensions: ['.ts', '.js'] })] },
    rules: { 'import-x/no-restricted-paths': ['error', { zones: layerZones() }] },
  },
]
