/**
 * API Gateway v2 <-> web Request/Response translation of the MCP Lambda (lambda/handlers/apigw.ts)
 * and the thin handler around the app (createMcpLambda) with stub ports: no network, no AWS.
 * Each test builds a valid event and changes one thing.
 */
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { isTextualContentType, requestFromEvent, resultFromResponse } from '../../../lambda/handlers/apigw';
import { createMcpLambda } from '../../../lambda/handlers/mcp-lambda';
import type { Logger } from '../../../lambda/log';
import type { Outbox, Store, WebhookClient } from '../../../lambda/ports';
import { eventFromRequest, localApiGateway, responseFromResult } from '../../support/apigw';

const MiB = 1024 * 1024;
const API_KEY = 'unit-test-api-key-0123456789abcdef';

function baseEvent(overrides: Partial<APIGatewayProxyEventV2> = {}): APIGatewayProxyEventV2 {
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: '/v1/messages',
    rawQueryString: '',
    headers: { 'content-type': 'application/json' },
    requestContext: {
      accountId: '000000000000',
      apiId: 'api',
      domainName: 'abc.execute-api.eu-west-1.amazonaws.com',
      domainPrefix: 'abc',
      http: { method: 'POST', path: '/v1/messages', protocol: 'HTTP/1.1', sourceIp: '203.0.113.9', userAgent: 'test' },
      requestId: 'req-123',
      routeKey: '$default',
      stage: '$default',
      time: '01/Jan/2026:00:00:00 +0000',
      timeEpoch: 0,
    },
    isBase64Encoded: false,
    ...overrides,
  };
}

function withMethod(method: string, event = baseEvent()): APIGatewayProxyEventV2 {
  return { ...event, requestContext: { ...event.requestContext, http: { ...event.requestContext.http, method } } };
}

const silentLog: Logger = { info: () => undefined, warn: () => undefined, error: () => undefined };

function unusedPort<T extends object>(name: string): T {
  return new Proxy({} as T, {
    get: (_, prop) => () => Promise.reject(new Error(`${name}.${String(prop)} must not be called in this test`)),
  });
}

function stubLambda(apiKey: string | undefined = API_KEY, store: Store = unusedPort<Store>('store')) {
  return createMcpLambda({
    store,
    outbox: unusedPort<Outbox>('outbox'),
    webhook: unusedPort<WebhookClient>('webhook'),
    apiKey: { get: async () => apiKey, peek: () => apiKey },
    deliveryWaitMs: 0,
    allowedOrigins: [],
    allowLoopbackCallbacks: false,
    log: silentLog,
  });
}

describe('MCP-1: event -> Request', () => {
  test('decodes a base64 body to the exact bytes', async () => {
    const bytes = Buffer.from([0x7b, 0x22, 0x6d, 0x22, 0x3a, 0x22, 0xc3, 0xa9, 0x22, 0x7d]); // {"m":"é"}
    const { request } = requestFromEvent(baseEvent({ body: bytes.toString('base64'), isBase64Encoded: true }));
    expect(Buffer.from(await request.arrayBuffer())).toEqual(bytes);
  });

  test('keeps a text body as UTF-8', async () => {
    const { request } = requestFromEvent(baseEvent({ body: '{"message":"héllo ☃"}' }));
    expect(await request.text()).toBe('{"message":"héllo ☃"}');
  });

  test('folds header names to lower case and joins repeats', () => {
    const { request } = requestFromEvent(
      baseEvent({ headers: { 'Content-Type': 'application/json', 'X-Thing': 'a', 'x-thing': 'b', Authorization: 'Bearer k' } }),
    );
    expect(request.headers.get('content-type')).toBe('application/json');
    expect(request.headers.get('x-thing')).toBe('a, b');
    expect(request.headers.get('authorization')).toBe('Bearer k');
  });

  test('keeps rawQueryString byte-exact, including the key parameter', () => {
    const { request } = requestFromEvent(baseEvent({ rawPath: '/mcp', rawQueryString: 'key=a%2Bb%3D&x=1&x=2' }));
    const url = new URL(request.url);
    expect(url.pathname).toBe('/mcp');
    expect(url.search).toBe('?key=a%2Bb%3D&x=1&x=2');
    expect(url.searchParams.get('key')).toBe('a+b=');
  });

  test('joins the cookies array into one cookie header', () => {
    const { request } = requestFromEvent(baseEvent({ cookies: ['a=1', 'b=2'] }));
    expect(request.headers.get('cookie')).toBe('a=1; b=2');
  });

  test('takes the method from requestContext.http.method and the request id from requestContext', () => {
    const { request, requestId } = requestFromEvent(withMethod('DELETE'));
    expect(request.method).toBe('DELETE');
    expect(requestId).toBe('req-123');
  });

  test('drops a body on GET', () => {
    const { request } = requestFromEvent(withMethod('GET', baseEvent({ body: 'ignored' })));
    expect(request.body).toBeNull();
  });

  test('does not decode a body over 1 MiB: no body, the real length declared', () => {
    const big = Buffer.alloc(MiB + 1, 0x61);
    const { request } = requestFromEvent(baseEvent({ body: big.toString('base64'), isBase64Encoded: true }));
    expect(request.body).toBeNull();
    expect(request.headers.get('content-length')).toBe(String(MiB + 1));
  });

  test('a body of exactly 1 MiB passes through', async () => {
    const exact = Buffer.alloc(MiB, 0x61);
    const { request } = requestFromEvent(baseEvent({ body: exact.toString('base64'), isBase64Encoded: true }));
    expect((await request.arrayBuffer()).byteLength).toBe(MiB);
  });

  test('ignores a client-sent content-length (the body is re-measured)', async () => {
    const { request } = requestFromEvent(baseEvent({ headers: { 'content-type': 'application/json', 'content-length': '999999999' }, body: '{}' }));
    expect(request.headers.get('content-length')).toBeNull();
    expect(await request.text()).toBe('{}');
  });

  test('drops a header value no web Request can carry instead of failing the request', () => {
    const { request } = requestFromEvent(baseEvent({ headers: { 'content-type': 'application/json', 'x-snow': 'a☃' } }));
    expect(request.headers.get('x-snow')).toBeNull();
    expect(request.headers.get('content-type')).toBe('application/json');
  });
});

describe('Response -> result', () => {
  test('copies status and headers and returns a JSON body as text', async () => {
    const result = await resultFromResponse(
      new Response('{"ok":true}', { status: 202, headers: { 'content-type': 'application/json', 'x-request-id': 'r1' } }),
    );
    expect(result).toMatchObject({ statusCode: 202, isBase64Encoded: false, body: '{"ok":true}' });
    expect(result.headers).toMatchObject({ 'content-type': 'application/json', 'x-request-id': 'r1' });
  });

  test('returns a binary body as base64', async () => {
    const bytes = Buffer.from([0, 1, 2, 250, 255]);
    const result = await resultFromResponse(new Response(bytes, { headers: { 'content-type': 'application/octet-stream' } }));
    expect(result.isBase64Encoded).toBe(true);
    expect(Buffer.from(result.body!, 'base64')).toEqual(bytes);
  });

  test('moves set-cookie headers to cookies', async () => {
    const headers = new Headers({ 'content-type': 'text/plain' });
    headers.append('set-cookie', 'a=1; Path=/');
    headers.append('set-cookie', 'b=2; Path=/');
    const result = await resultFromResponse(new Response('x', { headers }));
    expect(result.cookies).toEqual(['a=1; Path=/', 'b=2; Path=/']);
    expect(result.headers).not.toHaveProperty('set-cookie');
  });

  test('an empty body is an empty string', async () => {
    const result = await resultFromResponse(new Response(null, { status: 204 }));
    expect(result).toMatchObject({ statusCode: 204, body: '', isBase64Encoded: false });
  });

  test('textual content types', () => {
    expect(isTextualContentType('application/json; charset=utf-8')).toBe(true);
    expect(isTextualContentType('text/event-stream')).toBe(true);
    expect(isTextualContentType('application/problem+json')).toBe(true);
    expect(isTextualContentType('application/octet-stream')).toBe(false);
    expect(isTextualContentType(null)).toBe(false);
  });
});

describe('the MCP Lambda around the app', () => {
  test('HTTP-16: a body over 1 MiB is answered 413 by the app, without being decoded', async () => {
    const event = baseEvent({ rawQueryString: `key=${API_KEY}`, body: Buffer.alloc(MiB + 10, 0x20).toString('base64'), isBase64Encoded: true });
    const result = await stubLambda()(event);
    expect(result.statusCode).toBe(413);
    expect(JSON.parse(result.body!)).toMatchObject({ error: { code: 'payload_too_large' } });
  });

  test('HTTP-16: an oversized body on /mcp gets the JSON-RPC shape of the 413', async () => {
    const event = baseEvent({ rawPath: '/mcp', rawQueryString: `key=${API_KEY}`, body: 'x'.repeat(MiB + 1) });
    const result = await stubLambda()(event);
    expect(result.statusCode).toBe(413);
    expect(JSON.parse(result.body!)).toMatchObject({ jsonrpc: '2.0', error: { code: -32600 } });
  });

  test('HTTP-6: the API key is checked before the size: an oversized body without a key is 401', async () => {
    const result = await stubLambda()(baseEvent({ body: 'x'.repeat(MiB + 1) }));
    expect(result.statusCode).toBe(401);
    expect(result.headers).toMatchObject({ 'www-authenticate': 'Bearer' });
  });

  test('HTTP-4, HTTP-8: no key loaded: 503 on authenticated routes, /healthz still answers', async () => {
    const lambda = stubLambda(undefined);
    expect((await lambda(baseEvent({ rawQueryString: `key=${API_KEY}`, body: '{"message":"hi"}' }))).statusCode).toBe(503);
    expect((await lambda(withMethod('GET', baseEvent({ rawPath: '/healthz' })))).statusCode).toBe(200);
  });

  test('the request id of API Gateway becomes x-request-id', async () => {
    const result = await stubLambda()(withMethod('GET', baseEvent({ rawPath: '/healthz' })));
    expect(result.headers).toMatchObject({ 'x-request-id': 'req-123' });
    expect(JSON.parse(result.body!)).toEqual({ ok: true });
  });

  test('a method no web Request accepts is a 400, not a crash', async () => {
    const result = await stubLambda()(withMethod('CONNECT'));
    expect(result.statusCode).toBe(400);
  });

  test('builds the app once per key: the keyless app is replaced when the key arrives', async () => {
    let key: string | undefined;
    const lambda = createMcpLambda({
      store: unusedPort<Store>('store'),
      outbox: unusedPort<Outbox>('outbox'),
      webhook: unusedPort<WebhookClient>('webhook'),
      apiKey: { get: async () => key, peek: () => key },
      deliveryWaitMs: 0,
      allowedOrigins: [],
      allowLoopbackCallbacks: false,
      log: silentLog,
    });
    const event = withMethod('GET', baseEvent({ rawPath: '/mcp', rawQueryString: `key=${API_KEY}` }));
    expect((await lambda(event)).statusCode).toBe(503);
    key = API_KEY;
    expect((await lambda(event)).statusCode).toBe(405);
  });
});

describe('the test API Gateway (test/support/apigw.ts)', () => {
  test('builds a payload 2.0 event: lower-case headers, cookies, raw query, base64 for binary', async () => {
    const request = new Request('https://api.example/mcp?key=k&b=1', {
      method: 'POST',
      headers: { 'Content-Type': 'application/octet-stream', Cookie: 'a=1; b=2', 'X-Mixed': 'v' },
      body: Buffer.from([1, 2, 3]),
    });
    const event = await eventFromRequest(request, { requestId: 'rid' });
    expect(event).toMatchObject({
      version: '2.0',
      rawPath: '/mcp',
      rawQueryString: 'key=k&b=1',
      cookies: ['a=1', 'b=2'],
      isBase64Encoded: true,
      body: Buffer.from([1, 2, 3]).toString('base64'),
      requestContext: { http: { method: 'POST' }, requestId: 'rid', domainName: 'api.example' },
    });
    expect(event.headers['x-mixed']).toBe('v');
    expect(event.headers).not.toHaveProperty('cookie');
  });

  test('a round trip through the translation is lossless for JSON', async () => {
    const gateway = localApiGateway(async (event) => {
      const { request } = requestFromEvent(event);
      return resultFromResponse(new Response(await request.text(), { status: 201, headers: { 'content-type': 'application/json' } }));
    });
    const response = await gateway.fetch('https://api.example/echo', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"a":"é"}' });
    expect(response.status).toBe(201);
    expect(await response.text()).toBe('{"a":"é"}');
  });

  test('a plain string result means 200 with that body', async () => {
    expect(await responseFromResult('{"x":1}').json()).toEqual({ x: 1 });
  });
});
