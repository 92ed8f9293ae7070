/**
 * docs/commands.md against the commands: the page rendered from src/commands
 * (the same fields oclif's manifest records, which `npm run docs:commands`
 * renders) must equal the file, and every command must have an example.
 */
import {readdirSync, readFileSync} from 'node:fs'
import {join, resolve} from 'node:path'
import {describe, expect, it} from 'vitest'
import {commandsWithoutExamples, renderCommandsDoc, type CommandEntry} from '../../src/cli/commands-doc.js'
import {COMMAND_IDS, commandFile} from '../../src/cli/main.js'
import type {CommandClass} from '../../src/cli/command.js'

const ROOT = resolve(import.meta.dirname, '..', '..')

/** Every command in src/commands, by id (`firewall/allow.ts` is `firewall:allow`, `review/index.ts` is `review`), as oclif finds them. */
async function commandsFromSources(): Promise<CommandEntry[]> {
  const files = readdirSync(join(ROOT, 'src', 'commands'), {recursive: true, encoding: 'utf8'}).filter((f) => f.endsWith('.ts'))
  return Promise.all(
    files.map(async (file) => {
      const cls = (await import(join(ROOT, 'src', 'commands', file))).default as CommandClass
      const id = file.slice(0, -3).replace(/\/index$/, '').split('/').join(':')
      return {
        id,
        summary: cls.summary,
        description: cls.description,
        examples: cls.examples,
        hidden: cls.hidden,
        takesCommand: cls.takesCommand,
        args: cls.args,
        flags: {...cls.baseFlags, ...cls.flags},
      }
    }),
  )
}

describe('docs/commands.md', () => {
  it('is what npm run docs:commands makes from the commands (run it after changing a command)', async () => {
    const entries = await commandsFromSources()
    expect(entries.map((e) => e.id).sort()).toEqual([...COMMAND_IDS].sort())
    expect(readFileSync(join(ROOT, 'docs', 'commands.md'), 'utf8')).toBe(renderCommandsDoc(entries))
  }, 60_000)

  it('gives every command an example', async () => {
    expect(commandsWithoutExamples(await commandsFromSources())).toEqual([])
  }, 60_000)

  it('controls: a new command, a changed flag and a missing example all show', () => {
    const build: CommandEntry = {
      id: 'build',
      summary: 'Build it.',
      examples: ['<%= config.bin %> build'],
      args: {path: {description: 'workspace', required: false}},
      flags: {json: {type: 'boolean', description: 'print JSON'}},
    }
    const page = renderCommandsDoc([build])
    expect(page).toContain('`agent-sandbox build [PATH]`')
    expect(page).toContain('| `--json` | print JSON |')
    expect(page).toContain('```sh\nagent-sandbox build\n```')
    const added = renderCommandsDoc([build, {id: 'port', summary: 'Forward a port.', examples: ['<%= config.bin %> port 3000']}])
    expect(added).not.toBe(page)
    expect(added).toContain('agent-sandbox port 3000')
    expect(renderCommandsDoc([{...build, flags: {json: {type: 'boolean', description: 'print the result as JSON'}}}])).not.toBe(page)
    expect(commandsWithoutExamples([build, {id: 'port', examples: []}])).toEqual(['port'])
    expect(commandFile('firewall:allow')).toBe('firewall/allow')
  })

  it('controls: topics, values and markup are written as the reader types them', () => {
    const page = renderCommandsDoc([
      {
        id: 'firewall:allow',
        summary: 'Allow <domain> now.',
        description: 'Use `a<b` here.',
        takesCommand: true,
        examples: ['<%= config.bin %> firewall allow x'],
        args: {domain: {description: 'the domain', required: true}},
        flags: {
          engine: {type: 'option', options: ['docker', 'podman'], description: 'engine', helpGroup: 'GLOBAL'},
          methods: {type: 'option', multiple: true, description: 'methods | verbs'},
          tag: {type: 'option', default: 'latest', description: 'the tag'},
          secret: {type: 'boolean', hidden: true, description: 'hidden'},
        },
      },
    ])
    expect(page).toContain('## `firewall allow`')
    expect(page).toContain('[`firewall allow`](#firewall-allow) | Allow &lt;domain> now. |')
    expect(page).toContain('`agent-sandbox firewall allow DOMAIN -- COMMAND...`')
    expect(page).toContain('Use `a<b` here.')
    expect(page).toContain('| `--methods VALUE` | methods \\| verbs (repeatable) |')
    expect(page).toContain('| `--tag VALUE` | the tag (default: `latest`) |')
    expect(page.indexOf('--tag')).toBeLessThan(page.indexOf('--engine docker\\|podman'))
    expect(page).not.toContain('--secret')
  })
})
