import {agentCommandClass} from '../cli/agent-session.js'

export default agentCommandClass('claude', {
  summary: 'Run Claude Code in the sandbox, without its permission prompts; arguments go to claude.',
  autonomy: '--dangerously-skip-permissions',
  examples: [
    '<%= config.bin %> claude',
    '<%= config.bin %> claude -p "fix the failing test"',
    '<%= config.bin %> claude --branch feat --continue',
    '<%= config.bin %> claude --workspace ~/src/app --version',
  ],
})
