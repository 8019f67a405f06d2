/**
 * lambda/core/loopback.ts: the one home of this machine's loopback names, in the spellings each
 * caller meets (a URL's hostname, a Host header, a socket address, the HOST setting).
 */
import { isLoopbackHostname, LOOPBACK_ADDRESSES, LOOPBACK_HOSTNAMES, LOOPBACK_LITERAL_HOSTNAMES } from '../../../lambda/core/loopback';

describe('loopback names', () => {
  test('a URL reaches this machine by 127.0.0.1, [::1] or localhost, as new URL() spells them', () => {
    for (const url of ['http://127.0.0.1:8787/mcp', 'http://[::1]:8787/mcp', 'http://LOCALHOST:8787/mcp']) {
      expect(LOOPBACK_HOSTNAMES.has(new URL(url).hostname)).toBe(true);
    }
    expect(LOOPBACK_HOSTNAMES.has(new URL('http://127.0.0.2/').hostname)).toBe(false);
  });

  test('a callback may only name loopback as an IP literal, never as localhost', () => {
    expect([...LOOPBACK_LITERAL_HOSTNAMES].sort()).toEqual(['127.0.0.1', '[::1]']);
    expect(LOOPBACK_LITERAL_HOSTNAMES.has('localhost')).toBe(false);
  });

  test('a socket or resolver gives the addresses without brackets', () => {
    expect([...LOOPBACK_ADDRESSES].sort()).toEqual(['127.0.0.1', '::1']);
  });

  test.each(['127.0.0.1', '::1', '[::1]', 'localhost', 'LocalHost'])('%s is a loopback host name', (host) => {
    expect(isLoopbackHostname(host)).toBe(true);
  });

  test.each(['0.0.0.0', '::', '[::]', '127.0.0.2', '10.0.0.1', 'localhost.example.com', ''])('%s is not', (host) => {
    expect(isLoopbackHostname(host)).toBe(false);
  });
});
