/** A minimal POSIX ustar archive of regular files (names under 100 bytes): the engine's archive API and the volume helper read it. */
export function tarArchive(files: Array<{name: string; content: Buffer}>): Buffer {
  const blocks: Buffer[] = []
  for (const file of files) {
    if (Buffer.byteLength(file.name) >= 100 || file.name.includes('/')) throw new Error(`bad archive member name: ${file.name}`)
    const header = Buffer.alloc(512)
    const octal = (value: number, length: number) => value.toString(8).padStart(length - 1, '0') + '\0'
    header.write(file.name, 0, 100, 'utf8')
    header.write(octal(0o600, 8), 100, 8, 'ascii')
    header.write(octal(0, 8), 108, 8, 'ascii')
    header.write(octal(0, 8), 116, 8, 'ascii')
    header.write(octal(file.content.length, 12), 124, 12, 'ascii')
    header.write(octal(0, 12), 136, 12, 'ascii')
    header.write('        ', 148, 8, 'ascii')
    header.write('0', 156, 1, 'ascii')
    header.write('ustar\0', 257, 6, 'ascii')
    header.write('00', 263, 2, 'ascii')
    let sum = 0
    for (const byte of header) sum += byte
    header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8, 'ascii')
    blocks.push(header, file.content)
    const pad = (512 - (file.content.length % 512)) % 512
    if (pad) blocks.push(Buffer.alloc(pad))
  }
  blocks.push(Buffer.alloc(1024))
  return Buffer.concat(blocks)
}
