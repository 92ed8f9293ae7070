import {initConfigCommand} from '../cli/agent-config.js'

export default initConfigCommand('codex', {
  summary: 'Seed the Codex config volume (config.toml, the "high" profile, AGENTS.md); --auth imports the host login.',
  description: `Writes config.toml, high.config.toml (\`codex --profile high\`: model gpt-5, high reasoning effort) and AGENTS.md into the Codex volume mounted at /home/node/.codex, leaving existing files alone unless --force. With --auth, copies the host's ~/.codex/auth.json (always replacing the one in the volume) and profile.json (if present). Works whether or not a sandbox is running. The volume is the shared agent-sandbox-codex-config, or the workspace's own when its config sets "sharedAgentConfig": false.`,
  auth: "import the host's ~/.codex/auth.json (always replaced) and profile.json",
  force: 'overwrite config.toml, high.config.toml, AGENTS.md and profile.json if they exist',
})
