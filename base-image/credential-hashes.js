// doctor's agent-logins check (src/lib/sandbox/doctor-logins.ts): run as root
// with `node -e` in a sandbox, it prints the SHA-256 of every distinct
// token-like string (20+ of [A-Za-z0-9._-]) in the files an agent could read
// and in every process's environment and command line. Never a value.
// Usage: node -e "$(cat credential-hashes.js)" [ROOT…]
'use strict'
const {createHash} = require('node:crypto')
const {lstatSync, readFileSync, readdirSync} = require('node:fs')

// The roots come from the command line in tests only; doctor passes none.
const ROOTS = process.argv.length > 1 ? process.argv.slice(1) : ['/home', '/root', '/tmp', '/run', '/etc', '/var/tmp']
// A file this large is no credential store; reading it would only slow the check.
const MAX_FILE = 8 * 1024 * 1024
const TOKEN = /[A-Za-z0-9._-]{20,}/g
const seen = new Set()

function scan(text) {
  for (const m of text.matchAll(TOKEN)) seen.add(createHash('sha256').update(m[0]).digest('hex'))
}

function read(path) {
  try {
    return readFileSync(path).toString('latin1')
  } catch {
    return '' // gone meanwhile, or unreadable even to root (a FUSE mount): nothing to hash
  }
}

function walk(dir) {
  let names
  try {
    names = readdirSync(dir)
  } catch {
    return
  }
  for (const name of names) {
    const path = `${dir}/${name}`
    let stat
    try {
      stat = lstatSync(path)
    } catch {
      continue
    }
    if (stat.isDirectory()) walk(path)
    else if (stat.isFile() && stat.size <= MAX_FILE) scan(read(path))
  }
}

for (const root of ROOTS) walk(root)
// Every process's environment and command line (NUL-separated: one string each).
for (const pid of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
  for (const part of ['environ', 'cmdline']) scan(read(`/proc/${pid}/${part}`).replaceAll('\0', '\n'))
}
process.stdout.write([...seen].map((h) => `${h}\n`).join(''))
