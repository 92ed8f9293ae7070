#!/usr/bin/env node
// bundle-fast.mjs: bundle the CLI's fast path (dist/cli/fast.js and everything it
// imports from dist/) into one CommonJS file, dist/cli/fast.cjs. Run by `npm run build`
// after tsc.
//
// Why: bin/run.cjs runs `exec`, `list`, `shell`, `build`, `checkout` and `run`
// through this file. Loaded as ES modules the same code costs 15-20 ms more per
// command, node's ESM loader resolving and linking each of its modules, which is
// a quarter of a warm `exec` (docs/PERFORMANCE.md). Packages stay outside
// (required or imported from node_modules when a command needs them).
//
// import.meta.url: CommonJS has none, so every use in the bundle becomes this
// file's own URL. The one module that finds files from it (src/lib/assets.ts)
// looks upwards for the package root, so it does not matter where the bundle sits.
import {build} from 'esbuild'
import {fileURLToPath} from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))

await build({
  absWorkingDir: root,
  entryPoints: ['dist/cli/fast.js'],
  outfile: 'dist/cli/fast.cjs',
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  packages: 'external',
  define: {'import.meta.url': '__agentSandboxModuleUrl'},
  banner: {js: "const __agentSandboxModuleUrl = require('node:url').pathToFileURL(__filename).href;"},
  logLevel: 'warning',
})
