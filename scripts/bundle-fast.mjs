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
// file's own URL. The one module that finds files from it (src/lib/util/assets.ts)
// looks upwards for the package root, so it does not matter where the bundle sits.
import {build} from 'esbuild'
import {createHash} from 'node:crypto'
import {readFileSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const out = join(root, 'dist', 'cli', 'fast.cjs')

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

const body = readFileSync(out, 'utf8')
// The bundle runs as code compiled through a V8 code cache, where node 20 cannot
// import(): lazy imports must go through src/lib/util/lazy-import.ts, whose one import()
// is its fallback outside the cache.
const imports = body.match(/\bimport\(/g) ?? []
if (imports.length !== 1) {
  console.error(`bundle-fast: ${imports.length} import() calls in the fast path's bundle, expected 1 (src/lib/util/lazy-import.ts): load packages with lazyImport()`)
  process.exit(1)
}

// The content hash on the first line names the bundle's V8 code cache
// (bin/compile-cache.cjs): V8 checks a cache against the source's length only.
const hash = createHash('sha256').update(body).digest('hex').slice(0, 32)
writeFileSync(out, `// agent-sandbox fast path, build ${hash}\n${body}`)
