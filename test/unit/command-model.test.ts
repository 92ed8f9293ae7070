import {readdirSync, readFileSync} from 'node:fs'
import {join} from 'node:path'
import {pathToFileURL} from 'node:url'
import {describe, expect, it} from 'vitest'
import type {CommandClass} from '../../src/cli/command.js'
import {COMMAND_IDS, commandFile, route, runCli} from '../../src/cli/main.js'
import {parseCommandLine, type CommandShape} from '../../src/cli/parse.js'
import Checkout from '../../src/commands/checkout.js'
import Exec from '../../src/commands/exec.js'
import FirewallAllow from '../../src/commands/firewall/allow.js'
import Run from '../../src/commands/run.js'
import Shell from '../../src/commands/shell.js'
import Trust from '../../src/commands/trust.js'
import {UsageError} from '../../src/lib/errors.js'

const ROOT = join(import.meta.dirname, '..', '..')

function shapeOf(id: string, command: CommandClass): CommandShape {
  return {id, flags: {...command.baseFlags, ...command.flags}, args: command.args, strict: command.strict, takesCommand: command.takesCommand}
}

const parse = (id: string, command: CommandClass, argv: string[]) => parseCommandLine(shapeOf(id, command), argv)

describe('parseCommandLine', () => {
  it('parses exec: a path, flags in both spellings, and the command after the first --', () => {
    expect(parse('exec', Exec, ['/w s', '--branch', 'feat/x', '--network=none', '--', 'sh', '-c', 'exit 3', '--', '--help'])).toEqual({
      args: {path: '/w s'},
      flags: {branch: 'feat/x', network: 'none', 'allow-host-network': false},
      argv: ['/w s'],
      command: ['sh', '-c', 'exit 3', '--', '--help'],
    })
    expect(parse('exec', Exec, ['--engine', 'podman', '--', 'true']).flags.engine).toBe('podman')
    // No `--` at all is for the command to refuse; an empty command too.
    expect(parse('exec', Exec, ['.']).command).toBeUndefined()
    expect(parse('exec', Exec, ['.', '--']).command).toEqual([])
    // Words where the command should be, without `--`: for exec to say so, not an unexpected argument.
    expect(parse('exec', Exec, ['npm', 'test']).command).toBeUndefined()
  })

  it('parses checkout with its required branch and optional path', () => {
    expect(parse('checkout', Checkout, ['feat/x', '--json']).args).toEqual({branch: 'feat/x', path: undefined})
    expect(parse('checkout', Checkout, ['b', '/w']).args).toEqual({branch: 'b', path: '/w'})
  })

  it('parses run: one value per repeatable --env, an integer --pids-limit, limits', () => {
    const parsed = parse('run', Run, ['/w', '--env', 'A', '--env=B', '--pids-limit', '64', '--memory', '1g', '--cpus', '1.5', '--keep', '--timeout', '10s', '--', 'make', '--', 'x'])
    expect(parsed.args).toEqual({path: '/w'})
    expect(parsed.flags).toMatchObject({env: ['A', 'B'], 'pids-limit': 64, memory: '1g', cpus: '1.5', keep: true, timeout: '10s'})
    expect(parsed.command).toEqual(['make', '--', 'x'])
    // A path after a repeatable flag is the path, not another value.
    expect(parse('run', Run, ['--env', 'A', '/w', '--keep', '--', 'true']).args).toEqual({path: '/w'})
  })

  it('gives booleans false and takes one-letter aliases', () => {
    expect(parse('trust', Trust, ['-y']).flags).toMatchObject({yes: true, list: false, revoke: false, json: false})
  })

  it('keeps extra positionals of a command that is not strict, and for others `--` only ends the flags', () => {
    expect(parse('firewall:allow', FirewallAllow, ['a.example', 'b.example', './ws', '--save']).argv).toEqual(['a.example', 'b.example', './ws'])
    expect(parse('shell', Shell, ['--', '-odd-dir']).args).toEqual({path: '-odd-dir'})
    // A value that starts with - is taken when attached.
    expect(parse('exec', Exec, ['--branch=-x', '--', 'true']).flags.branch).toBe('-x')
  })

  it.each([
    [Exec, 'exec', ['--bogus', '--', 'true'], 'Nonexistent flag: --bogus'],
    [Exec, 'exec', ['-x', '--', 'true'], 'Nonexistent flag: -x'],
    [Exec, 'exec', ['--network', 'sideways', '--', 'true'], 'Expected --network=sideways to be one of: firewall, none, open'],
    [Exec, 'exec', ['--engine=lxc', '--', 'true'], 'Expected --engine=lxc to be one of: docker, podman'],
    [Exec, 'exec', ['--branch', '--', 'true'], '--branch expects a value'],
    [Exec, 'exec', ['--branch', '-x', '--', 'true'], '--branch expects a value (for one that starts with -, write --branch=-x)'],
    [Exec, 'exec', ['--branch', 'a', '--branch', 'b', '--', 'true'], '--branch can only be given once'],
    [Exec, 'exec', ['a', 'b', '--', 'true'], 'Unexpected argument: b'],
    [Shell, 'shell', ['--build=yes'], '--build takes no value'],
    [Shell, 'shell', ['--no-build'], 'Nonexistent flag: --no-build'],
    [Shell, 'shell', ['a', '--', 'b'], 'Unexpected argument: b'],
    [Checkout, 'checkout', [], 'Missing required argument: branch'],
    [Checkout, 'checkout', ['b', '.', 'extra'], 'Unexpected argument: extra'],
    [Run, 'run', ['--pids-limit', '15', '--', 'true'], '--pids-limit must be at least 16, not 15'],
    [Run, 'run', ['--pids-limit', '1.5', '--', 'true'], '--pids-limit expects an integer, not "1.5"'],
    [Run, 'run', ['--pids-limit=-20', '--', 'true'], '--pids-limit must be at least 16, not -20'],
    [Run, 'run', ['--keep', '--keep', '--', 'true'], '--keep can only be given once'],
    [Run, 'run', ['--env', '--', 'true'], '--env expects a value'],
    [Run, 'run', ['--__proto__', '--', 'true'], 'Nonexistent flag: --__proto__'],
  ] as const)('%s: refuses %j', (command, id, argv, message) => {
    let error: unknown
    try {
      parse(id, command, [...argv])
    } catch (caught) {
      error = caught
    }
    expect(error).toBeInstanceOf(UsageError)
    expect((error as UsageError).message).toBe(message)
    expect((error as UsageError).hint).toBe(`see agent-sandbox ${id.replace(':', ' ')} --help`)
  })
})

describe('route', () => {
  it('finds commands and topic commands, and leaves help, topics and unknown names to oclif', () => {
    expect(route(['exec', '--', 'ls', '--help'])).toEqual({id: 'exec', rest: ['--', 'ls', '--help']})
    expect(route(['firewall', 'allow', 'x.example'])).toEqual({id: 'firewall:allow', rest: ['x.example']})
    // A command that is also a topic: its subcommands first, else itself (from its folder's index).
    expect(route(['review', 'show', 'main'])).toEqual({id: 'review:show', rest: ['main']})
    expect(route(['review', './app', '--json'])).toEqual({id: 'review', rest: ['./app', '--json']})
    expect(route(['review'])).toEqual({id: 'review', rest: []})
    expect([commandFile('review'), commandFile('review:show'), commandFile('firewall:allow')]).toEqual(['review/index', 'review/show', 'firewall/allow'])
    for (const argv of [['exec', '--help', '--', 'true'], ['list', '-h'], ['firewall'], ['firewall', 'nope'], ['nope'], ['help', 'exec'], ['__proto__'], ['toString'], []]) {
      expect(route(argv), JSON.stringify(argv)).toBeUndefined()
    }
  })
})

describe('runCli', () => {
  it("runs the routed command's class through its file, with the id set", async () => {
    const loaded: string[] = []
    const code = await runCli(['firewall', 'allow', '--bogus'], (file) => {
      loaded.push(file)
      return FirewallAllow
    })
    expect(loaded).toEqual(['firewall/allow'])
    expect(FirewallAllow.id).toBe('firewall:allow')
    expect(code).toBe(2)
  })
})

describe('one definition per command', () => {
  const files = readdirSync(join(ROOT, 'src', 'commands'), {recursive: true, encoding: 'utf8'})
    .filter((f) => f.endsWith('.ts'))
    .map((f) => f.slice(0, -3))
    .sort()

  it('COMMAND_IDS names exactly the files in src/commands', () => {
    expect([...COMMAND_IDS].map(commandFile).sort()).toEqual(files)
  })

  it.each(files)('%s is a Command with a summary and examples, and loads no oclif', async (file) => {
    const {default: command} = (await import(pathToFileURL(join(ROOT, 'src', 'commands', `${file}.ts`)).href)) as {default: CommandClass}
    expect(typeof command.run).toBe('function')
    expect(command.summary.length).toBeGreaterThan(10)
    expect(command.examples.length).toBeGreaterThan(0)
    expect(readFileSync(join(ROOT, 'src', 'commands', `${file}.ts`), 'utf8')).not.toMatch(/@oclif\/core/)
  })

  it('only the entry (for help) loads oclif: nothing under src/ imports it', () => {
    const sources = readdirSync(join(ROOT, 'src'), {recursive: true, encoding: 'utf8'}).filter((f) => f.endsWith('.ts'))
    const importers = sources.filter((f) => /from '@oclif\/core'|import\('@oclif\/core'\)/.test(readFileSync(join(ROOT, 'src', f), 'utf8')))
    expect(importers).toEqual([])
  })
})
