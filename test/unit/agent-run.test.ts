import {readFileSync} from 'node:fs'
import {join, resolve} from 'node:path'
import {describe, expect, it} from 'vitest'
import {parseCommandLine} from '../../src/cli/parse.js'
import {Flags} from '../../src/cli/params.js'
import {AGENTS, agentCommand} from '../../src/lib/sandbox/agent-run.js'

const ROOT = resolve(import.meta.dirname, '..', '..')

/** `alias NAME='…'` of base-image/bashrc, as words. */
function alias(name: string): string[] {
  const text = readFileSync(join(ROOT, 'base-image', 'bashrc'), 'utf8')
  const match = new RegExp(`^alias ${name}='([^']*)'$`, 'm').exec(text)
  if (!match) throw new Error(`no alias ${name} in base-image/bashrc`)
  return match[1].split(/\s+/)
}

describe('the agents\' autonomy flags', () => {
  it('are those of the freeclaude and freecodex aliases in the image', () => {
    expect([AGENTS.claude.bin, ...AGENTS.claude.autonomy]).toEqual(alias('freeclaude'))
    expect([AGENTS.codex.bin, ...AGENTS.codex.autonomy]).toEqual(alias('freecodex'))
  })

  it('control: the alias reader sees a difference', () => {
    expect(alias('freeclaude')).not.toEqual(['claude', '--dangerously-skip-permissions', '--extra'])
    expect(() => alias('nosuchalias')).toThrow(/no alias/)
  })
})

describe('agentCommand', () => {
  it('puts the autonomy flags before the user\'s arguments', () => {
    expect(agentCommand('claude', [])).toEqual(['claude', '--dangerously-skip-permissions'])
    expect(agentCommand('claude', ['-p', 'fix it'])).toEqual(['claude', '--dangerously-skip-permissions', '-p', 'fix it'])
    expect(agentCommand('codex', ['--version'])).toEqual(['codex', '--dangerously-bypass-approvals-and-sandbox', '--version'])
  })

  it('gives `codex exec` the flag after the subcommand, which parses its own flags', () => {
    expect(agentCommand('codex', ['exec', 'fix it'])).toEqual(['codex', 'exec', '--dangerously-bypass-approvals-and-sandbox', 'fix it'])
    expect(agentCommand('codex', ['e', '--json', 'x'])).toEqual(['codex', 'e', '--dangerously-bypass-approvals-and-sandbox', '--json', 'x'])
  })
})

describe('a pass-through command line', () => {
  const shape = {
    id: 'claude',
    flags: {branch: Flags.string({description: 'b'}), workspace: Flags.string({description: 'w'}), engine: Flags.string({description: 'e', options: ['docker', 'podman']})},
    args: {},
    strict: true,
    takesCommand: false,
    passThrough: true,
  }

  it('takes its own flags first, then passes everything on, flags included', () => {
    const parsed = parseCommandLine(shape, ['--branch', 'feat', '-p', 'do it', '--branch', 'x'])
    expect(parsed.flags.branch).toBe('feat')
    expect(parsed.command).toEqual(['-p', 'do it', '--branch', 'x'])
  })

  it('passes on from the first word that is not its own, or after --', () => {
    expect(parseCommandLine(shape, ['exec', '--json', 'task']).command).toEqual(['exec', '--json', 'task'])
    expect(parseCommandLine(shape, ['--workspace=/w', '--', '--branch', 'y']).command).toEqual(['--branch', 'y'])
    expect(parseCommandLine(shape, ['--workspace=/w', '--', '--branch', 'y']).flags.workspace).toBe('/w')
    expect(parseCommandLine(shape, []).command).toEqual([])
  })

  it('still refuses a bad value of its own flags', () => {
    expect(() => parseCommandLine(shape, ['--engine', 'lxc', '-p', 'x'])).toThrow(/one of: docker, podman/)
    expect(() => parseCommandLine(shape, ['--branch'])).toThrow(/expects a value/)
  })
})
