#!/usr/bin/env node
/**
 * Where a warm exec's time goes: timestamps (ms since the process started) after
 * node's own start, our imports, connecting, and two Engine API execs of
 * `sandbox-exec true` in a running sandbox. For docs/PERFORMANCE.md's floor.
 * Usage: node bench/trace-exec.js <container>   (e.g. from `agent-sandbox list`)
 */
const t = (label) => process.stderr.write(`${label.padEnd(24)} ${performance.now().toFixed(0)} ms\n`)
t('node reaches our code')
const name = process.argv[2]
if (!name) {
  process.stderr.write('usage: node bench/trace-exec.js <container>\n')
  process.exit(2)
}
const {connectEngine} = await import('../dist/lib/engine/index.js')
await import('../dist/lib/workspace.js')
t('modules loaded')
const engine = await connectEngine()
t('engine client ready')
for (const round of [1, 2]) {
  const r = await engine.containers.exec(name, ['/usr/local/bin/sandbox-exec', 'true'], {user: 'node', collect: false})
  if (r.exitCode !== 0) throw new Error(`exec failed with ${r.exitCode}`)
  t(`API exec ${round} done`)
}
process.exit(0)
