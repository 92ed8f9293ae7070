/** A host address that only this machine can reach: IPv4 127/8, IPv6 ::1, or the name localhost. */
export function isLoopbackHost(ip: string): boolean {
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(ip) || ip === '::1' || ip === 'localhost'
}
