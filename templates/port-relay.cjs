// The relay of `agent-sandbox port`, run inside the sandbox as `node -e <this file> PORT` by one engine exec per
// forwarded connection (src/lib/sandbox/port-forward.ts): stdin to 127.0.0.1:PORT, PORT to stdout, each end of
// input passed on. A refused connection says why on stderr and exits 1.
const socket = require('net').connect(Number(process.argv[1]), '127.0.0.1')
socket.on('error', (e) => {
  process.stderr.write(`${e.code || e.message}\n`)
  process.exit(1)
})
socket.on('connect', () => {
  process.stdin.pipe(socket)
  socket.pipe(process.stdout)
})
// The host side went away: nothing more to write.
process.stdout.on('error', () => process.exit(0))
