/**
 * Two rules of docs/contract/http.md at the door of the HTTP app, one failure mode per test:
 * - the API key: either credential that matches authenticates, so an empty or stale `?key=` left
 *   in a connector URL does not hide a valid `Authorization: Bearer`, and a
 *   wrong Bearer does not hide a valid `?key=`; two wrong ones are still 401;
 * - the Origin: besides configured origins, the server's own origin (`http://` + one of its
 *   allowed Host values) passes on the local runtime; foreign origins, other schemes
 *   and anything that is not a bare origin stay refused; behind API Gateway (no Host list) only
 *   configured origins pass.
 */
import { CorsPolicy } from '../../../lambda/core/protocol';
import type { App } from '../../../lambda/http/app';
import { API_KEY, buildApp, keyQuery, legacyHeaders, request, send } from '../../support/app';

const ping = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

describe('HTTP-5: API key: either matching credential authenticates', () => {
  const { app } = buildApp();

  test('MCP-11: an empty ?key= does not hide a valid Bearer header', async () => {
    const answer = await send(app, { query: 'key=', headers: legacyHeaders(bearer(API_KEY)), body: ping });
    expect(answer.status).toBe(200);
  });

  test('a wrong ?key= does not hide a valid Bearer header', async () => {
    const answer = await send(app, { query: keyQuery('stale-key'), headers: legacyHeaders(bearer(API_KEY)), body: ping });
    expect(answer.status).toBe(200);
  });

  test('a wrong Bearer header does not hide a valid ?key=', async () => {
    const answer = await send(app, { query: keyQuery(), headers: legacyHeaders(bearer('stale-key')), body: ping });
    expect(answer.status).toBe(200);
  });

  test('HTTP-9: a wrong ?key= and a wrong Bearer are 401', async () => {
    const answer = await send(app, { query: keyQuery('wrong-1'), headers: legacyHeaders(bearer('wrong-2')), body: ping });
    expect(answer.status).toBe(401);
    expect(answer.headers.get('www-authenticate')).toBe('Bearer');
  });

  test('HTTP-9: an empty ?key= and no Bearer is 401', async () => {
    const answer = await send(app, { query: 'key=', headers: legacyHeaders(), body: ping });
    expect(answer.status).toBe(401);
  });

  test('HTTP-5: the bare key in X-Api-Key authenticates (what a tunnel-client profile sends); a wrong one is 401', async () => {
    expect((await send(app, { query: 'key=', headers: legacyHeaders({ 'x-api-key': API_KEY }), body: ping })).status).toBe(200);
    const wrong = await send(app, { query: 'key=', headers: legacyHeaders({ 'x-api-key': 'stale-key-0123456789' }), body: ping });
    expect(wrong.status).toBe(401);
  });

  test('the same holds on the REST route', async () => {
    const answer = await send(app, {
      path: '/v1/messages',
      query: 'key=',
      headers: { 'content-type': 'application/json', ...bearer(API_KEY) },
      body: '{"message":"hi"}',
    });
    // Authenticated: past the door, the fake store has no subscription (409), not 401.
    expect(answer.status).toBe(409);
  });
});

describe('HTTP-13: Origin: the local runtime accepts its own origin (docs/contract/http.md)', () => {
  const local = buildApp({ allowedHosts: ['127.0.0.1:8787', 'localhost:8787', '[::1]:8787', 'tunnel.example.com'] }).app;
  async function status(app: App, origin: string, host = '127.0.0.1:8787'): Promise<number> {
    const response = await app.handle(request({ headers: legacyHeaders({ origin }), body: ping }), { host });
    return response.status;
  }

  test.each(['http://127.0.0.1:8787', 'http://localhost:8787', 'http://[::1]:8787', 'http://LOCALHOST:8787', 'http://tunnel.example.com'])(
    'HTTP-15: its own origin %s is accepted',
    async (origin) => {
      expect(await status(local, origin)).toBe(200);
    },
  );

  test('the accepted own origin is echoed in the CORS headers', async () => {
    const response = await local.handle(request({ headers: legacyHeaders({ origin: 'http://localhost:8787' }), body: ping }), { host: 'localhost:8787' });
    expect(response.headers.get('access-control-allow-origin')).toBe('http://localhost:8787');
  });

  test.each([
    ['a foreign host', 'http://evil.example.com'],
    ['an allowed host on another port', 'http://127.0.0.1:9999'],
    ['an allowed host name without its port', 'http://localhost'],
    ['https instead of http (docs/contract/http.md says http://)', 'https://127.0.0.1:8787'],
    ['an origin with a path', 'http://127.0.0.1:8787/mcp'],
    ['user info in front of an allowed host', 'http://evil@127.0.0.1:8787'],
    ['the literal null origin', 'null'],
    ['an empty origin', ''],
  ])('HTTP-11: %s is refused with 403', async (_why, origin) => {
    expect(await status(local, origin)).toBe(403);
  });

  test('behind API Gateway (no Host list) the own-origin rule does not apply: only configured origins pass', async () => {
    const behindGateway = buildApp({ allowedHosts: undefined, allowedOrigins: ['https://inspector.example'] }).app;
    expect(await status(behindGateway, 'http://127.0.0.1:8787')).toBe(403);
    expect(await status(behindGateway, 'https://inspector.example')).toBe(200);
  });

  test('a preflight from an allowed origin answers the one CORS policy (core/protocol CorsPolicy), the one API Gateway answers', async () => {
    const { app } = buildApp({ allowedHosts: ['127.0.0.1:8787'], allowedOrigins: ['https://inspector.example'] });
    const answer = await app.handle(request({ method: 'OPTIONS', headers: { origin: 'https://inspector.example', 'access-control-request-method': 'GET' } }), {
      host: '127.0.0.1:8787',
    });
    expect(answer.status).toBe(204);
    const list = (name: string) => (answer.headers.get(name) ?? '').split(',').map((item) => item.trim());
    expect(answer.headers.get('access-control-allow-origin')).toBe('https://inspector.example');
    expect(list('access-control-allow-methods')).toEqual([...CorsPolicy.allowMethods]);
    expect(list('access-control-allow-headers')).toEqual([...CorsPolicy.allowHeaders]);
    expect(list('access-control-expose-headers')).toEqual([...CorsPolicy.exposeHeaders]);
    expect(answer.headers.get('access-control-max-age')).toBe(String(CorsPolicy.maxAgeS));
  });

  test('a configured origin still passes on the local runtime', async () => {
    const configured = buildApp({ allowedHosts: ['127.0.0.1:8787'], allowedOrigins: ['https://inspector.example'] }).app;
    expect(await status(configured, 'https://inspector.example')).toBe(200);
  });
});
