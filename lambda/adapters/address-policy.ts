/**
 * Which IP addresses an outbound callback may reach (docs/contract/outbound-guard.md): only
 * globally routable unicast. IPv4-mapped IPv6 is judged as the IPv4 address it carries.
 *
 * Deliberately not here: DNS resolution, connecting, and the local switch's exception for a URL
 * that names 127.0.0.1 or [::1] literally (guarded-https.ts).
 */
import ipaddr from 'ipaddr.js';

const FORBIDDEN_V4 = `0.0.0.0/8 10.0.0.0/8 100.64.0.0/10 127.0.0.0/8 169.254.0.0/16 172.16.0.0/12 192.0.0.0/24 192.0.2.0/24 192.168.0.0/16
  198.18.0.0/15 198.51.100.0/24 203.0.113.0/24 224.0.0.0/4 240.0.0.0/4 255.255.255.255/32`
  .split(/\s+/)
  .map((cidr) => ipaddr.IPv4.parseCIDR(cidr));

// Beyond the contract's list, the last: the deprecated IPv4-compatible block (RFC 4291 2.5.5.1,
// `[::127.0.0.1]`). ipaddr.js calls it plain "unicast", it is not globally routable, and some
// stacks carry it to the embedded IPv4 address.
const FORBIDDEN_V6 = '::/128 ::1/128 ::ffff:0:0/96 64:ff9b::/96 100::/64 2001:db8::/32 fc00::/7 fe80::/10 ff00::/8 ::/96'
  .split(' ')
  .map((cidr) => ipaddr.IPv6.parseCIDR(cidr));

/** True when `address` (a plain IP string, no brackets or zone) must not be contacted. */
export function isForbiddenAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return true;
  const ip = ipaddr.process(address);
  if (ip.kind() === 'ipv4') {
    const v4 = ip as ipaddr.IPv4;
    return FORBIDDEN_V4.some((range) => v4.match(range)) || v4.range() !== 'unicast';
  }
  const v6 = ip as ipaddr.IPv6;
  if (v6.zoneId) return true;
  // Beyond the contract's list, ipaddr.js's non-unicast classes (6to4, Teredo, ORCHID, ...) can tunnel
  // to addresses the list forbids, so they are refused as well.
  return FORBIDDEN_V6.some((range) => v6.match(range)) || v6.range() !== 'unicast';
}
