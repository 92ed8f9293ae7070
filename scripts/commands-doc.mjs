#!/usr/bin/env node
// commands-doc.mjs: write docs/commands.md from oclif.manifest.json, which `npm run build`
// makes from the commands' own definitions (src/commands). Run as `npm run docs:commands`
// (build, then this). The page's text comes from src/cli/commands-doc.ts, which
// test/unit/commands-doc.test.ts also renders from src/commands: that test fails when the
// file here and the commands differ.
import {existsSync, readFileSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const manifestFile = join(root, 'oclif.manifest.json')
if (!existsSync(manifestFile)) {
  console.error('commands-doc: oclif.manifest.json is missing (hint: run npm run docs:commands, which builds first)')
  process.exit(1)
}
const {renderCommandsDoc, commandsWithoutExamples} = await import(join(root, 'dist', 'cli', 'commands-doc.js'))
const entries = Object.values(JSON.parse(readFileSync(manifestFile, 'utf8')).commands)
const missing = commandsWithoutExamples(entries)
if (missing.length) {
  console.error(`commands-doc: no example for ${missing.join(', ')} (hint: add one to the command's static examples)`)
  process.exit(1)
}
writeFileSync(join(root, 'docs', 'commands.md'), renderCommandsDoc(entries))
console.error(`commands-doc: wrote docs/commands.md (${entries.length} commands)`)
