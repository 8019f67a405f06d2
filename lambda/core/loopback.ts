/**
 * This machine's loopback names, said once. A URL's `hostname` and a Host header spell IPv6 in
 * brackets (`[::1]`); a socket, a resolver's answer or the HOST setting may give it bare (`::1`).
 * `localhost` is a name, not an address: it is this machine for a Host header or a server's own
 * URL, but a callback URL must be an IP literal (a resolver decides what a name points at).
 * Only 127.0.0.1 of 127.0.0.0/8 is taken as loopback: dm-dot never listens on or allows another.
 *
 * Deliberately not here: whether loopback is allowed anywhere (the outbound guard's switch, the
 * admin routes' Host check) — only what counts as loopback.
 */

/** Loopback as an IP literal in a URL (`new URL(u).hostname`). */
export const LOOPBACK_LITERAL_HOSTNAMES: ReadonlySet<string> = new Set(['127.0.0.1', '[::1]']);

/** Every name a URL or a Host header reaches this machine by: the literals and `localhost`. */
export const LOOPBACK_HOSTNAMES: ReadonlySet<string> = new Set(['127.0.0.1', 'localhost', '[::1]']);

/** The loopback addresses as a socket or a resolver gives them (IPv6 without brackets). */
export const LOOPBACK_ADDRESSES: ReadonlySet<string> = new Set(['127.0.0.1', '::1']);

/** True for a loopback host name in either spelling of IPv6 (`::1`, `[::1]`), in any letter case. */
export function isLoopbackHostname(host: string): boolean {
  const name = host.toLowerCase();
  return LOOPBACK_HOSTNAMES.has(name) || LOOPBACK_ADDRESSES.has(name);
}
