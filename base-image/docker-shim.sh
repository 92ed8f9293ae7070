#!/bin/sh
# docker ARGS...: the sandbox's `docker` is rootless Podman (nestedContainers).
# Installed as /usr/local/bin/docker. `docker compose` becomes `podman compose`,
# which runs Debian's docker-compose against the same Podman.
if [ "${AGENT_SANDBOX_NESTED:-}" != 1 ]; then
  echo "docker: nested containers are off in this sandbox; start it with --nested (or set \"nestedContainers\": true)" >&2
  exit 125
fi
export PODMAN_IGNORE_CGROUPSV1_WARNING=1
# --log-level=error: without it every call warns about the single-uid mapping, which is deliberate here.
exec podman --log-level=error "$@"
