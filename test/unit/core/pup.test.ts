/**
 * What pup's requests mean once verified (lambda/core/pup.ts): both readings of the challenge,
 * the member-event envelope and the forms of `event`, the invocation context, the principal and
 * the default manifest. Each test pins one reading documented in docs/pup.md ("What is inferred").
 */
import { principalOf } from '../../../lambda/core/identity';
import { challengeAnswer, defaultPupManifest, parsePupEvent, pupContextOf, PUP_PRINCIPAL } from '../../../lambda/core/pup';

describe('PUP-15: challengeAnswer', () => {
  test('a JSON string is answered with the same JSON text, escapes kept', () => {
    expect(challengeAnswer('"a\\u0041b"')).toEqual({ ok: true, body: '"a\\u0041b"' });
  });

  test('surrounding JSON whitespace is dropped, nothing else', () => {
    expect(challengeAnswer(' \n"abc"\t')).toEqual({ ok: true, body: '"abc"' });
  });

  test('an object with challenge is answered {"challenge": same value}, other fields dropped', () => {
    expect(challengeAnswer('{"type":"verification","challenge":"n1"}')).toEqual({ ok: true, body: '{"challenge":"n1"}' });
    expect(challengeAnswer('{"challenge":{"nonce":7}}')).toEqual({ ok: true, body: '{"challenge":{"nonce":7}}' });
  });

  test.each([
    ['not JSON', '{'],
    ['a number', '42'],
    ['an array', '["x"]'],
    ['an object without challenge', '{"nonce":"x"}'],
    ['a null challenge', '{"challenge":null}'],
    ['JSON null', 'null'],
  ])('%s is refused', (_label, body) => {
    expect(challengeAnswer(body).ok).toBe(false);
  });
});

describe('PUP-16: parsePupEvent', () => {
  const base = { version: 1, id: 'msg_1', eventId: 'e_1', occurredAt: '2026-11-30T12:00:00Z', context: { installationId: 'inst_1' } };

  test.each([
    ['a string', 'member.joined', undefined],
    ['an object with type and memberId', { type: 'member.joined', memberId: 'm_1' }, 'm_1'],
    ['an object with name and userId', { name: 'member.joined', userId: 'u_1' }, 'u_1'],
    ['an object with member.id', { type: 'member.joined', member: { id: 'm_2' } }, 'm_2'],
    ['an object with user.id as a number', { type: 'member.joined', user: { id: 1234567 } }, '1234567'],
  ])('event as %s', (_label, event, memberId) => {
    const parsed = parsePupEvent({ ...base, event }, 'msg_1');
    expect(parsed).toEqual({
      ok: true,
      event: { type: 'member.joined', known: true, eventId: 'e_1', installationId: 'inst_1', ...(memberId ? { memberId } : {}) },
    });
  });

  test('member.left is known; another type is parsed but not known', () => {
    expect(parsePupEvent({ ...base, event: 'member.left' }, 'msg_1')).toMatchObject({ ok: true, event: { known: true } });
    expect(parsePupEvent({ ...base, event: { type: 'role.changed' } }, 'msg_1')).toMatchObject({ ok: true, event: { type: 'role.changed', known: false } });
  });

  test('type wins over name when both are there', () => {
    expect(parsePupEvent({ ...base, event: { type: 'member.left', name: 'member.joined' } }, 'msg_1')).toMatchObject({
      ok: true,
      event: { type: 'member.left' },
    });
  });

  test('extra envelope fields are allowed', () => {
    expect(parsePupEvent({ ...base, event: 'member.joined', delivery: { attempt: 2 } }, 'msg_1').ok).toBe(true);
  });

  test.each([
    ['an event object with neither type nor name', { ...base, event: { memberId: 'm' } }, /event must be/],
    ['an empty event name', { ...base, event: '' }, /event/],
    ['occurredAt that is not a time', { ...base, event: 'member.joined', occurredAt: 'yesterday' }, /occurredAt/],
    ['context that is not an object', { ...base, event: 'member.joined', context: 'x' }, /context/],
    ['a missing version', { ...base, version: undefined, event: 'member.joined' }, /version/],
    ['a body that is not an object', 'member.joined', /envelope/],
  ])('%s is invalid_envelope naming it', (_label, value, message) => {
    const parsed = parsePupEvent(value, 'msg_1');
    expect(parsed).toMatchObject({ ok: false, code: 'invalid_envelope' });
    expect((parsed as { message: string }).message).toMatch(message);
  });

  test('an id other than the webhook-id is id_mismatch', () => {
    expect(parsePupEvent({ ...base, event: 'member.joined' }, 'msg_2')).toMatchObject({ ok: false, code: 'id_mismatch' });
  });
});

describe('PUP-13: pupContextOf', () => {
  const message = (context: unknown) => ({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { _meta: { 'io.puphq/context': context } } });

  test('ids come back as text; settings and userRequest never do', () => {
    const check = pupContextOf(
      message({ installationId: 'i', askerId: 42, channelId: 'c', callId: 'k', settings: { a: 1 }, userRequest: 'text', extra: true }),
    );
    expect(check).toEqual({ kind: 'ok', ids: { installationId: 'i', askerId: '42', channelId: 'c', callId: 'k' } });
  });

  test('discovery: no channelId, no askerId', () => {
    expect(pupContextOf(message({ installationId: 'i' }))).toEqual({ kind: 'ok', ids: { installationId: 'i' } });
  });

  test.each([
    ['no params', { jsonrpc: '2.0', id: 1, method: 'ping' }],
    ['no _meta', { jsonrpc: '2.0', id: 1, method: 'ping', params: {} }],
    ['no context key', { jsonrpc: '2.0', id: 1, method: 'ping', params: { _meta: {} } }],
    ['a batch', [message({ installationId: 'i' })]],
    ['not JSON at all', undefined],
  ])('%s is absent', (_label, value) => {
    expect(pupContextOf(value)).toEqual({ kind: 'absent' });
  });

  test.each([
    ['no installationId', {}, /installationId/],
    ['an object as installationId', { installationId: {} }, /installationId/],
    ['settings that are not an object', { installationId: 'i', settings: 'x' }, /settings/],
    ['userRequest that is not a string', { installationId: 'i', userRequest: 5 }, /userRequest/],
    ['a context that is a string', 'inst', /io\.puphq\/context/],
  ])('%s is invalid, naming the field', (_label, context, name) => {
    const check = pupContextOf(message(context));
    expect(check.kind).toBe('invalid');
    expect((check as { message: string }).message).toMatch(name);
  });
});

describe('the pup principal and the default manifest', () => {
  test('PUP-14: the principal is fixed, hex, and not the principal of any ordinary key text', () => {
    expect(PUP_PRINCIPAL).toMatch(/^[0-9a-f]{64}$/);
    for (const key of ['pup', 'pup-door', '\u0000pup', 'pup:']) expect(PUP_PRINCIPAL).not.toBe(principalOf(key));
  });

  test('PUP-6: the default manifest names the three endpoints (relative) and the one tool', () => {
    const manifest = defaultPupManifest('1.2.3');
    expect(manifest).toMatchObject({
      name: 'dm-dot',
      version: '1.2.3',
      mcp: { url: '/pup/mcp', protocolVersion: '2026-07-28' },
      challengeUrl: '/pup/challenge',
      eventsUrl: '/pup/events',
    });
    expect(manifest.tools).toEqual([expect.objectContaining({ name: 'send_to_dot' })]);
  });
});
