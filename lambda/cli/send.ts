/**
 * `dm-dot send "text"`: POST /v1/messages to the local server (found as `npm start` does) or any
 * deployment (`--url`, `--key`), and prints the outcome: delivered, queued (retries continue) or
 * failed with its category, with the event id. Exit 1 when the message was not accepted or its
 * delivery failed.
 *
 * Deliberately not here: message validation beyond "there is a message" (the server's rules are
 * the only rules), retries of the POST itself (a second POST would be a second event), and
 * printing the key.
 */
import { OperationError, parse, reach, redactor, serverTarget, TARGET_OPTIONS, UsageError, withProgress, type CliIo, type Command } from './common';

const HELP = `Usage: dm-dot send "message" [--url URL] [--key KEY] [--json]

Sends one message to the dot (POST /v1/messages) and prints the outcome:
delivered, queued (not acknowledged yet; retries continue) or failed with its
category, and the event id. Exit code 1 when it was not accepted or failed.
Use - as the message to read it from standard input.

Options:
  --url URL     the server (default: the local server, as npm start runs it)
  --key KEY     the API key (default: MCP_API_KEY, else <state dir>/api-key)
  --json        print the server's JSON answer
  -h, --help    this help
`;

export const sendCommand: Command = {
  name: 'send',
  summary: 'send a message to the dot (POST /v1/messages)',
  async run(argv: string[], io: CliIo & { stdin?: () => Promise<string> }): Promise<number> {
    const { values, positionals } = parse(argv, TARGET_OPTIONS, true);
    if (values.help) {
      io.out(HELP);
      return 0;
    }
    if (positionals.length === 0) throw new UsageError('missing the message: dm-dot send "text"');
    if (positionals.length > 1) throw new UsageError('one message only: quote it, e.g. dm-dot send "hello there"');
    let message = positionals[0]!;
    if (message === '-') {
      if (!io.stdin) throw new UsageError('cannot read the message from standard input here');
      message = await io.stdin();
    }
    if (message.trim() === '') throw new UsageError('the message is empty');
    const { url, key } = await serverTarget(values, io);
    const redact = redactor(key);
    const response = await withProgress(
      io,
      'waiting for the dot to answer',
      reach(`${url}/v1/messages`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ message }) }, 'POST /v1/messages'),
    );
    const text = await response.text();
    let body: { eventId?: string; status?: string; error?: { code?: string; message?: string; eventId?: string; reason?: string } } = {};
    try {
      body = JSON.parse(text);
    } catch {
      // Not ours (a proxy's page?): described by status below.
    }
    if (values.json) io.out(`${redact(JSON.stringify({ httpStatus: response.status, ...body }))}\n`);
    switch (response.status) {
      case 200:
        if (!values.json) io.out(`delivered ${body.eventId}: the dot accepted it.\n`);
        return 0;
      case 202:
        if (!values.json) io.out(`queued ${body.eventId}: not acknowledged yet; retries continue (see dm-dot events).\n`);
        return 0;
      case 502:
        if (!values.json) io.out(`failed ${body.error?.eventId ?? ''}: ${body.error?.reason ?? 'rejected'}. ${body.error?.message ?? ''}\n`);
        return 1;
      case 401:
        throw new OperationError('the server refused the API key (pass --key, or check MCP_API_KEY and <state dir>/api-key)');
      case 409:
        throw new OperationError('no dot is subscribed: run dm-dot dot (locally) or connect the dot in ChatGPT first');
      default:
        throw new OperationError(redact(`the server answered ${response.status}: ${body.error?.message ?? (text.slice(0, 200) || 'no body')}`));
    }
  },
};
