/**
 * The one convention of every `dm-dot` command, in-process through `main`: `--help` made by
 * commander from the declarations and listing every option, `-V` everywhere, one message form for bad usage (exit 2)
 * that names the flag, and `--json` as exactly one document pretty-printed the same way.
 */
import { COMMANDS, GROUPS } from '../../../lambda/cli/commands';
import type { Command } from '../../../lambda/cli/command';
import { COMMON_OPTIONS, type OptionSpec } from '../../../lambda/cli/args';
import { version } from '../../../lambda/version';
import { run, tempDir } from './support';

let commands: Command[];
beforeAll(async () => {
  commands = await Promise.all(Object.values(COMMANDS).map((load) => load()));
});

const NAMES = Object.keys(COMMANDS);
const words = (name: string) => name.split(' ');
const flat = (text: string) => text.replace(/\s+/g, ' ');

/** A directory that holds nothing: no server, no database. */
let empty: Awaited<ReturnType<typeof tempDir>>;
beforeAll(async () => {
  empty = await tempDir('dmdot-cli-empty-');
});
afterAll(() => empty.remove());
const env = () => ({ DMDOT_STATE_DIR: `${empty.dir}/state`, PORT: '1' });

describe('CLI-11: help', () => {
  it.each(NAMES)('%s --help is exit 0 on stdout and lists every option it declares with its description', async (name) => {
    const spec = commands[NAMES.indexOf(name)]!.spec;
    const r = await run([...words(name), '--help']);
    expect(r.code).toBe(0);
    expect(r.err).toBe('');
    expect(r.out.startsWith(`Usage: dm-dot ${name}`)).toBe(true);
    for (const [option, declared] of Object.entries<OptionSpec>({ ...spec.options, ...COMMON_OPTIONS })) {
      const flag = declared.short ? `-${declared.short}, --${option}` : `--${option}`;
      // commander's layout: a value placeholder in angle brackets.
      expect(r.out).toContain(declared.type === 'string' ? `${flag} <${declared.value}>` : flag);
      expect(flat(r.out)).toContain(flat(declared.description));
    }
    expect(flat(r.out)).toContain(flat(spec.json));
  });

  it.each(NAMES)('%s -h is the same help as --help', async (name) => {
    expect((await run([...words(name), '-h'])).out).toBe((await run([...words(name), '--help'])).out);
  });

  it('dm-dot --help lists every command; no command at all is exit 2 with the list on stderr', async () => {
    const help = await run(['--help']);
    expect(help.code).toBe(0);
    for (const name of NAMES) expect(help.out).toMatch(new RegExp(`^  ${name} `, 'm'));
    const none = await run([]);
    expect(none.code).toBe(2);
    expect(none.out).toBe('');
    expect(none.err).toBe(help.out);
  });

  it.each(Object.keys(GROUPS))('dm-dot %s --help lists its actions', async (group) => {
    const r = await run([group, '--help']);
    expect(r.code).toBe(0);
    for (const action of GROUPS[group]!.actions) if (COMMANDS[`${group} ${action}`]) expect(r.out).toContain(`${group} ${action}`);
  });

  it("dm-dot help <command> is that command's help", async () => {
    expect((await run(['help', 'events', 'show'])).out).toBe((await run(['events', 'show', '--help'])).out);
  });
});

describe('version', () => {
  it.each([[], ...NAMES.map(words)].map((w) => [w.join(' ') || '(none)', w] as const))(
    'dm-dot %s -V and --version print the version, exit 0',
    async (_label, w) => {
      for (const flag of ['-V', '--version']) {
        const r = await run([...w, flag]);
        expect(r).toMatchObject({ code: 0, out: `${version}\n`, err: '' });
      }
    },
  );
});

describe('CLI-12: bad usage: exit 2, one message form naming the flag, nothing on stdout (without --json)', () => {
  it.each(NAMES)('%s --bogus is "unknown option --bogus"', async (name) => {
    const r = await run([...words(name), '--bogus'], { env: env() });
    expect(r).toEqual({ code: 2, out: '', err: `dm-dot ${name}: unknown option --bogus\nRun dm-dot ${name} --help for usage.\n`, asked: [] });
  });

  it.each(NAMES)('%s -x (an unknown short option) is "unknown option -x"', async (name) => {
    const r = await run([...words(name), '-x'], { env: env() });
    expect(r.err).toBe(`dm-dot ${name}: unknown option -x\nRun dm-dot ${name} --help for usage.\n`);
    expect(r.code).toBe(2);
  });

  const EVT = `evt_${'0'.repeat(32)}`;
  it.each([
    [['events', '--last', '0'], 'events', '--last must be an integer from 1 to 10000'],
    [['events', '--last', '2.5'], 'events', '--last must be an integer from 1 to 10000'],
    [['events', '--last'], 'events', '--last needs a value (--last N)'],
    [['events', '--last', '--json'], 'events', '--last needs a value (--last N)'],
    [['events', '--json=yes'], 'events', '--json takes no value'],
    [['events', '--status', 'lost'], 'events', '--status must be one of queued, delivered, failed, dropped, kept'],
    [['events', '--table', 'x'], 'events', '--table needs --aws'],
    [['events', 'bogus'], 'events', 'unknown action "bogus": use list or show or resend'],
    [['events', 'show'], 'events show', 'missing evt_…'],
    [['events', 'show', 'evt_x'], 'events show', 'the event id must be evt_ followed by 32 hex digits, got "evt_x"'],
    [['events', 'show', EVT, 'more'], 'events show', 'unexpected argument "more" (expected evt_…)'],
    [['events', 'show', EVT, '--last', '5'], 'events show', 'unknown option --last'],
    [['events', 'list', '--last', '0'], 'events list', '--last must be an integer from 1 to 10000'],
    [['events', 'resend', 'nope'], 'events resend', 'the event id must be evt_ followed by 32 hex digits, got "nope"'],
    [['events', 'resend', EVT, '--queue-url', 'https://q'], 'events resend', '--queue-url needs --aws'],
    [['subscription', 'remove'], 'subscription', 'unknown action "remove": use show or clear'],
    [['subscription', 'show', 'extra'], 'subscription show', 'unexpected argument "extra"'],
    [['subscription', 'clear', '--stack', 'S'], 'subscription clear', '--stack needs --aws'],
    [['key'], 'key', 'missing the action: rotate'],
    [['key', 'spin'], 'key', 'unknown action "spin": use rotate'],
    [['key', 'rotate', '--region', 'eu-west-1'], 'key rotate', '--region needs --aws'],
    [['redrive', '--dlq-url', 'https://q'], 'redrive', '--dlq-url needs --aws'],
    [['status', '--stack', 'S'], 'status', '--stack needs --aws'],
    [['connect', '--region', 'eu-west-1'], 'connect', '--region needs --aws'],
    [['send'], 'send', 'missing MESSAGE'],
    [['send', 'a', 'b'], 'send', 'unexpected argument "b" (expected MESSAGE)'],
    [['send', '   '], 'send', 'the message is empty'],
    [['send', 'hi', '--url', 'ftp://example.com'], 'send', '--url must be an http: or https: URL'],
    [['send', 'hi', '--url', 'not a url'], 'send', '--url must be an absolute http(s) URL, e.g. https://abc.execute-api.eu-west-1.amazonaws.com/mcp'],
    [
      ['send', 'hi', '--url', 'https://example.com/mcp?key=abc'],
      'send',
      '--url must not carry user info, a query or a fragment (pass the key with --key or MCP_API_KEY)',
    ],
    [['dot', '--status', '99'], 'dot', '--status must be an integer from 200 to 599'],
    [['dot', '--ttl', '1000'], 'dot', '--ttl must be an integer from 60000 to 604800000'],
    [['dot', '--delay=-1'], 'dot', '--delay must be an integer from 0 to 60000'],
    [['dot', '--port', '70000'], 'dot', '--port must be an integer from 0 to 65535'],
    [['dot', '--delay'], 'dot', '--delay needs a value (--delay MS)'],
  ])('%j: dm-dot %s: %s', async (argv, name, message) => {
    const r = await run(argv as string[], { env: { ...env(), MCP_API_KEY: 'k'.repeat(40) } });
    // A command line with --json also gets the error document on stdout (CLI-15).
    const out = (argv as string[]).includes('--json') ? `${JSON.stringify({ error: { code: 'usage', message } }, null, 2)}\n` : '';
    expect(r).toEqual({ code: 2, out, err: `dm-dot ${name}: ${message}\nRun dm-dot ${name} --help for usage.\n`, asked: [] });
  });

  it.each([
    [['frobnicate', '--json'], '', 'unknown command "frobnicate"'],
    [['events', '--status', 'bogus', '--json'], 'events', '--status must be one of'],
    [['connect', '--tunnel', 'tunnel_x', '--json'], 'connect', '--tunnel must be a tunnel id'],
    [['send', '--json'], 'send', 'missing MESSAGE'],
  ])('CLI-15: %j with --json: the sentence on stderr and {"error": {"code": "usage", "message"}} on stdout, exit 2', async (argv, name, message) => {
    const r = await run(argv as string[], { env: { ...env(), MCP_API_KEY: 'k'.repeat(40) } });
    expect(r.code).toBe(2);
    expect(r.err).toMatch(new RegExp(`^dm-dot${name ? ` ${name}` : ''}: `));
    const doc = JSON.parse(r.out);
    expect(doc).toEqual({ error: { code: 'usage', message: expect.stringContaining(message) } });
    expect(r.err).toContain(doc.error.message);
  });

  it('an unknown command, and an unknown option before any command', async () => {
    expect(await run(['bogus'])).toEqual({ code: 2, out: '', err: 'dm-dot: unknown command "bogus"\nRun dm-dot --help for usage.\n', asked: [] });
    expect(await run(['--bogus'])).toEqual({ code: 2, out: '', err: 'dm-dot: unknown option --bogus\nRun dm-dot --help for usage.\n', asked: [] });
  });

  it('a bad setting in the environment is bad usage naming the setting', async () => {
    const r = await run(['events'], { env: { PORT: 'eighty' } });
    expect(r.code).toBe(2);
    expect(r.err).toBe('dm-dot events: PORT must be an integer from 0 to 65535, got "eighty"\nRun dm-dot events --help for usage.\n');
  });
});

describe('CLI-11: --json: exactly one document, pretty-printed the same way, also when the command fails', () => {
  const cases: [string[], number][] = [
    [['status', '--json'], 0],
    [['connect', '--json'], 0],
    [['events', '--json'], 1],
    [['events', 'show', `evt_${'0'.repeat(32)}`, '--json'], 1],
    [['events', 'resend', `evt_${'0'.repeat(32)}`, '--json'], 1],
    [['subscription', '--json'], 1],
    [['subscription', 'clear', '--yes', '--json'], 1],
    [['redrive', '--json'], 1],
    [['key', 'rotate', '--yes', '--json'], 1],
    [['send', 'hi', '--json', '--url', 'http://127.0.0.1:1', '--key', 'k'.repeat(40)], 1],
  ];
  it.each(cases)('%j exits %i with one JSON document on stdout', async (argv, code) => {
    const r = await run(argv, { env: env() });
    expect(r.code).toBe(code);
    const doc = JSON.parse(r.out);
    expect(r.out).toBe(`${JSON.stringify(doc, null, 2)}\n`);
    if (code === 1 && !('status' in doc)) expect(doc).toEqual({ error: { code: expect.any(String), message: expect.any(String) } });
  });

  it('a failure prints one line on stderr and, with --json, the error document on stdout', async () => {
    const r = await run(['events', '--json'], { env: env() });
    const line = r.err.trim();
    expect(r.err.split('\n').filter(Boolean)).toHaveLength(1);
    expect(JSON.parse(r.out).error).toEqual({ code: 'no_state', message: line.replace(/^dm-dot events: /, '') });
  });
});

describe('CLI-12: exit 1: the operation failed', () => {
  it('with nothing recorded yet, events says where it looked and what to do', async () => {
    const r = await run(['events'], { env: env() });
    expect(r.code).toBe(1);
    expect(r.out).toBe('');
    expect(r.err).toBe(
      `dm-dot events: no database in ${empty.dir}/state yet: start the server once with npm start (it creates one, importing an earlier layout if there is one), or point DMDOT_STATE_DIR at its state directory\n`,
    );
  });

  it('CLI-3: send without any key says where the key comes from', async () => {
    const r = await run(['send', 'hi'], { env: env() });
    expect(r.code).toBe(1);
    expect(r.err).toBe(`dm-dot send: no API key: pass --key, set MCP_API_KEY, or start the local server once (it writes ${empty.dir}/state/api-key)\n`);
  });

  it('CLI-3: send to a server that does not listen is exit 1 and says so', async () => {
    const r = await run(['send', 'hi', '--url', 'http://127.0.0.1:1/mcp', '--key', 'k'.repeat(40)]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/^dm-dot send: not accepted: no server at http:\/\/127\.0\.0\.1:1 \(ECONNREFUSED\)/);
  });
});

describe('status with nothing recorded', () => {
  it('CLI-7: could look: exit 0, and says the server is not running and nothing is recorded yet', async () => {
    const r = await run(['status'], { env: env() });
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^server +not running, and nothing is recorded yet/m);
    expect(JSON.parse((await run(['status', '--json'], { env: env() })).out)).toMatchObject({
      mode: 'local',
      server: { running: false },
      readFrom: 'nothing',
      events: null,
    });
  });
});
