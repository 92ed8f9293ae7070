#!/usr/bin/env node
import {execute} from '@oclif/core'

// `shell` is the default command: `agent-sandbox` and `agent-sandbox <dir>` open a shell.
const argv = process.argv.slice(2)
if (argv.length === 0 || /^(\.|\/|~)/.test(argv[0])) argv.unshift('shell')

await execute({args: argv, dir: import.meta.url})
