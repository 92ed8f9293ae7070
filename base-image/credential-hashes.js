// doctor's agent-logins check (src/lib/sandbox/doctor-logins.ts): run as root
// with `node -e` in a sandbox, it prints the SHA-256 of every distinct
// token-like string (20+ of [A-Za-z0-9._-]) in the files an agent could read
// and in every process's environment and command line. Never a value.
