/**
 * What the push gates of a workspace let through, from their logs: every
 * accepted ref update is a line `git-gate: accepted <old> <new> <ref>` on the
 * gate's stderr (gate-hooks/pre-receive), which the engine keeps as the gate
 * container's log. A gate is made anew whenever its sandbox starts, so its
 * log covers the pushes since the sandbox's last start.
 */
import type {Engine} from '../engine/index.js'
import {Labels, type Workspace} from '../workspace.js'

export interface GateLogEntry {
  /** When the engine logged it (RFC 3339), when the log had time stamps. */
  at?: string
  old: string
  new: string
  ref: string
}

export interface GatePush extends GateLogEntry {
  /** The sandbox whose gate took the push. */
  sandbox: string
  /** That sandbox's branch (branch mode); empty for bind mode. */
  sandboxBranch: string
}

const ACCEPTED = /^(?:(\d{4}-\d\d-\d\dT\S+)\s+)?git-gate: accepted ([0-9a-f]{40,64}) ([0-9a-f]{40,64}) (refs\/\S+)$/

/** The accepted ref updates in a gate's log text, oldest first (lines may start with the engine's time stamp). Pure. */
export function parseGateLog(text: string): GateLogEntry[] {
  const entries: GateLogEntry[] = []
  for (const line of text.split('\n')) {
    const m = ACCEPTED.exec(line.trim())
    if (m) entries.push({...(m[1] ? {at: m[1]} : {}), old: m[2], new: m[3], ref: m[4]})
  }
  return entries
}

/** Every push the workspace's gates logged, gate by gate (sandboxes in name order), each gate's oldest first. */
export async function readGatePushes(engine: Engine, ws: Workspace): Promise<GatePush[]> {
  const gates = await engine.containers.list({[Labels.managed]: 'true', [Labels.workspace]: ws.path, [Labels.kind]: 'gate'})
  gates.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  const logs = await Promise.all(gates.map((gate) => engine.containers.logs(gate.id, 'all', {timestamps: true}).catch(() => '')))
  return gates.flatMap((gate, i) =>
    parseGateLog(logs[i]).map((entry) => ({...entry, sandbox: gate.labels[Labels.gateOf] ?? gate.name, sandboxBranch: gate.labels[Labels.branch] ?? ''})),
  )
}
