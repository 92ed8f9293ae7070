#!/usr/bin/env node
// hook-head-config.cjs PACKAGE_JSON BACKUP: give PACKAGE_JSON the hook keys HEAD has.
// Called by hook-dispatch.sh (as the agent, from the work tree) before a real hook
// runs. If package.json's "lint-staged", "commitlint", "simple-git-hooks" or
// "husky" differ from HEAD's, the file's exact bytes are copied to BACKUP, the
// file is rewritten in place (same inode and mode) with HEAD's values for those
// keys (a key HEAD lacks is removed), and the changed keys are printed, quoted
// and comma-separated. Prints nothing when there is nothing to change, or when
// either version is not a JSON object (the tools would not read it either).
// Exit 0 unless something unexpected failed. Env: AGENT_SANDBOX_REAL_GIT.
'use strict'
const {execFileSync} = require('node:child_process')
const {readFileSync, writeFileSync, copyFileSync} = require('node:fs')

const KEYS = ['lint-staged', 'commitlint', 'simple-git-hooks', 'husky']
const [file, backup] = process.argv.slice(2)
if (!file || !backup) {
  process.stderr.write('usage: hook-head-config.cjs PACKAGE_JSON BACKUP\n')
  process.exit(2)
}

function object(text) {
  try {
    const v = JSON.parse(text)
    return v && typeof v === 'object' && !Array.isArray(v) ? v : undefined
  } catch {
    return undefined
  }
}

const text = readFileSync(file, 'utf8')
const work = object(text)
let headText = ''
try {
  headText = execFileSync(process.env.AGENT_SANDBOX_REAL_GIT || '/usr/bin/git', ['cat-file', '-p', `HEAD:${file}`], {encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], maxBuffer: 64 << 20})
} catch {
  headText = '{}' // HEAD has no package.json: it configures no hook there.
}
const head = object(headText)
if (!work || !head) process.exit(0)
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b)
const changed = KEYS.filter((k) => !same(work[k], head[k]))
if (!changed.length) process.exit(0)
const out = {}
for (const [k, v] of Object.entries(work)) {
  if (!KEYS.includes(k)) out[k] = v
  else if (k in head) out[k] = head[k]
}
for (const k of KEYS) if (k in head && !(k in work)) out[k] = head[k]
const indent = /^[ \t]*\{\s*\n([ \t]+)"/.exec(text)?.[1] ?? '  '
copyFileSync(file, backup)
writeFileSync(file, `${JSON.stringify(out, null, indent)}\n`)
process.stdout.write(changed.map((k) => `"${k}"`).join(', '))
