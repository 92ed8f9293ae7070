import {Flags} from '@oclif/core'
import {BaseCommand} from '../cli/base.js'
import {listSandboxes} from '../lib/sandbox.js'

export default class List extends BaseCommand {
  static override summary = 'List every sandbox, running or not.'
  static override examples = ['<%= config.bin %> list', '<%= config.bin %> list --json']
  static override flags = {json: Flags.boolean({description: 'print the rows as JSON'})}

  async run(): Promise<void> {
    const {flags} = await this.parse(List)
    const engine = await this.engine(flags)
    const rows = await listSandboxes({engine})
    if (flags.json) return this.outJson(rows)
    if (rows.length === 0) return this.out('no sandboxes')
    const table = [
      ['NAME', 'REPO', 'MODE', 'BRANCH', 'STATUS', 'WORKDIR', 'LIMITS', 'PATH'],
      ...rows.map((r) => [
        r.name,
        r.repo,
        r.mode,
        r.branch || '-',
        r.running ? 'running' : r.status,
        r.workdir,
        Object.entries(r.limits)
          .map(([k, v]) => `${k}=${String(v)}`)
          .join(' ') || '-',
        r.path,
      ]),
    ]
    // The App's token state, only when some sandbox uses it (docs/github-app.md).
    if (rows.some((r) => r.github)) table.forEach((row, i) => row.splice(row.length - 1, 0, i === 0 ? 'GITHUB' : (rows[i - 1].github?.summary ?? '-')))
    const widths = table[0].map((_, i) => Math.max(...table.map((row) => row[i].length)))
    for (const row of table) this.out(row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]))).join('  '))
  }
}
