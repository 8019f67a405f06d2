/**
 * A loopback proxy for the conformance suite's Tasks-extension scenarios: like proxy.ts it adds
 * `Authorization: Bearer <key>` and forwards everything else to the runtime, Host and Origin
 * included; in addition it stands in for the suite's fixture tools, which dm-dot does not have,
 * by turning a call to one of them into a call to dm-dot's only tool, `send_to_dot`. The message
 * names the fixture and its arguments, so a test's dot can behave as the fixture would (answer
 * after `seconds`, refuse a `failing_job`): the task the suite then observes is dm-dot's own task
 * over a real delivery.
 *
 * What it rewrites, and only in a POST body that is one JSON-RPC `tools/call` request:
 * - `slow_compute {seconds, label}` -> `send_to_dot {message: "slow_compute seconds=<n> label=<label>"}`
 *   (` label=…` left out when there is no label);
 * - `failing_job` -> `send_to_dot {message: "failing_job"}`;
 * - `greet {name}` -> `send_to_dot {message: "greet <name>"}`;
 * and with it the `Mcp-Name` header, to `send_to_dot`, when that header named the fixture (the
 * runtime checks that header and body agree; a header that already disagreed with the body is
 * left as it was, so a mismatch the client sent still reaches the runtime), and `content-length`.
 * Every other part of params (`_meta`, a legacy `task` hint, `inputResponses`, ...) travels as sent.
 *
 * Deliberately not rewritten: any other tool (`protocol_error_job`, `confirm_delete`,
 * `multi_input`, `test_tool_with_task`, ...), which reaches the runtime as sent and gets its
 * unknown-tool answer; every other method (`tasks/get`, `tasks/update`, `tasks/cancel`,
 * `server/discover`, `tools/list`, ...); the `Mcp-Method` header; batches; and every answer: the
 * runtime's answers, `tools/list` and tool results included, reach the client byte for byte (no
 * tasks scenario reads `tools/list`, and a result's text stays dm-dot's delivery receipt).
 *
 * It logs each rewrite (fixture, arguments, the message sent, the runtime's status) and each
 * `tools/call` it passed through unchanged, so a test can tell that the stand-in was used.
 * Deliberately not here either: TLS, and any address other than 127.0.0.1.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { forward } from './proxy';

export interface Rewrite {
  /** The fixture tool the client called. */
  tool: string;
  args: Record<string, unknown>;
  /** The `send_to_dot` message it became. */
  message: string;
  /** Whether the `Mcp-Name` header was rewritten too (it named the fixture). */
  headerRewritten: boolean;
  /** The runtime's HTTP status, or 502 when it could not be reached (set when it answered). */
  status?: number;
}

export interface FixtureProxy {
  port: number;
  /** `http://127.0.0.1:<port>`. */
  origin: string;
  rewrites: Rewrite[];
  /** Names of the `tools/call` requests forwarded unchanged. */
  passedThrough: string[];
  /** The runtime to forward to (`http://127.0.0.1:<port>`); until set, requests answer 503. */
  setTarget(target: string): void;
  close(): Promise<void>;
}

const TOOL = 'send_to_dot';

const isObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

/** The `send_to_dot` message standing in for a fixture tool, or undefined when the tool is not one. */
export function fixtureMessage(tool: string, args: Record<string, unknown>): string | undefined {
  switch (tool) {
    case 'slow_compute':
      return `slow_compute seconds=${String(args.seconds)}${args.label === undefined ? '' : ` label=${String(args.label)}`}`;
    case 'failing_job':
      return 'failing_job';
    case 'greet':
      return `greet ${String(args.name)}`;
    default:
      return undefined;
  }
}

export async function startFixtureProxy(key: string): Promise<FixtureProxy> {
  let target: URL | undefined;
  const rewrites: Rewrite[] = [];
  const passedThrough: string[] = [];
  const agent = new http.Agent({ keepAlive: true });

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (!target) {
        res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"proxy has no target yet"}');
        return;
      }
      let body = Buffer.concat(chunks);
      const headers: http.OutgoingHttpHeaders = { ...req.headers, authorization: `Bearer ${key}` };
      let rewrite: Rewrite | undefined;
      if (req.method === 'POST') {
        let message: unknown;
        try {
          message = JSON.parse(body.toString('utf8'));
        } catch {
          message = undefined; // not JSON: forwarded as it is, the runtime answers it
        }
        if (isObject(message) && message.method === 'tools/call' && isObject(message.params) && typeof message.params.name === 'string') {
          const params = message.params;
          const tool = params.name as string;
          const args = isObject(params.arguments) ? params.arguments : {};
          const text = fixtureMessage(tool, args);
          if (text === undefined) passedThrough.push(tool);
          else {
            const sentName = req.headers['mcp-name'];
            const headerRewritten = typeof sentName === 'string' && sentName.trim() === tool;
            if (headerRewritten) headers['mcp-name'] = TOOL;
            body = Buffer.from(JSON.stringify({ ...message, params: { ...params, name: TOOL, arguments: { message: text } } }), 'utf8');
            rewrite = { tool, args, message: text, headerRewritten };
            rewrites.push(rewrite);
          }
        }
      }
      delete headers['transfer-encoding'];
      headers['content-length'] = String(body.length);
      forward({
        target,
        agent,
        req,
        res,
        headers,
        body,
        onStatus: (status) => {
          if (rewrite) rewrite.status = status;
        },
      });
    });
  });

  await new Promise<void>((done, fail) => {
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => done());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    origin: `http://127.0.0.1:${port}`,
    rewrites,
    passedThrough,
    setTarget(next: string) {
      target = new URL(next);
    },
    close: () =>
      new Promise<void>((done) => {
        server.close(() => done());
        server.closeAllConnections();
        agent.destroy();
      }),
  };
}
