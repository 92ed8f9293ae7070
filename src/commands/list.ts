import {Flags} from '../cli/params.js'
import {Command, type Input} from '../cli/command.js'
import {formatSandboxTable, listSandboxes} from '../lib/sandbox/listing.js'

export default class List extends Command {
  static override summary = 'List every sandbox, running or not.'
  static override examples = ['<%= config.bin %> list', '<%= config.bin %> list --json']
  static override flags = {json: Flags.boolean({description: 'print the rows as JSON'})}

  async run({flags}: Input<typeof List>): Promise<number | void> {
    const engine = await this.engine(flags)
    const rows = await listSandboxes({engine})
    if (flags.json) return this.outJson(rows)
    for (const line of formatSandboxTable(rows)) this.out(line)
  }
}
