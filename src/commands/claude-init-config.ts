import {initConfigCommand} from '../cli/agent-config.js'

export default initConfigCommand('claude', {
  summary: 'Seed the Claude Code config volume (settings.json, CLAUDE.md); --auth imports the host login.',
  description: `Writes settings.json and CLAUDE.md into the Claude Code volume mounted at /home/node/.claude, leaving existing files alone unless --force. With --auth, copies the host's ~/.claude/.credentials.json (always replacing the one in the volume) and ~/.claude.json (kept as .claude/.claude.json, which the image links to ~/.claude.json), whichever exist. Works whether or not a sandbox is running. The volume is the shared agent-sandbox-claude-code-config, or the workspace's own when its config sets "sharedAgentConfig": false.`,
  auth: "import the host's ~/.claude/.credentials.json (always replaced) and ~/.claude.json",
  force: 'overwrite settings.json, CLAUDE.md and .claude.json if they exist',
})
