import {agentCommandClass} from '../cli/agent-session.js'

export default agentCommandClass('codex', {
  summary: 'Run Codex in the sandbox, without its approvals and its own sandbox; arguments go to codex.',
  autonomy: '--dangerously-bypass-approvals-and-sandbox',
  examples: [
    '<%= config.bin %> codex',
    '<%= config.bin %> codex exec "fix the failing test"',
    '<%= config.bin %> codex --branch feat',
    '<%= config.bin %> codex --workspace ~/src/app --version',
  ],
})
