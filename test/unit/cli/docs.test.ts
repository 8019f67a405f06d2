/**
 * The user-facing pages against the code they describe: every setting the local runtime reads is
 * in the README's settings table; every command is in the README's command list and in
 * operating.md's one-screen table; the README's "Connecting a client" table leads with ChatGPT
 * through the tunnel and the AWS URL and quotes what to ask the dot, word for word as `dm-dot
 * connect` prints it; and no page says a key rotation has no overlap or changes the subscription
 * id, or names a Node version the stack does not deploy.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DOT_INSTRUCTIONS } from '../../../lambda/cli/local-server/tunnel';
import { ROOT } from '../../support/paths';
import { commandTree } from './support';

const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');
const README = read('README.md');
const OPERATING = read('docs/operating.md');
const CHATGPT = read('docs/chatgpt.md');
/** A blockquote as one line of text. */
const unquoted = (text: string) => text.replace(/\n> ?/g, ' ').replace(/\s+/g, ' ');

/** The environment variables lambda/config/settings.ts reads for the local runtime (not AWS's own, not the CLI's --aws ones). */
function localSettingNames(): string[] {
  const source = read('lambda/config/settings.ts');
  const names = new Set([...source.matchAll(/env\.([A-Z][A-Z0-9_]*)/g)].map((m) => m[1]!));
  const awsOnly = /^(AWS_|LAMBDA_|API_KEY_SECRET_ARN$|PUP_SECRET_ARN$|QUEUE_URL$|DEAD_LETTER_QUEUE_URL$|TABLE_NAME$)/;
  const cliAws = ['DMDOT_STACK', 'DMDOT_TABLE', 'DMDOT_QUEUE_URL', 'DMDOT_DLQ_URL'];
  return [...names].filter((name) => !awsOnly.test(name) && !cliAws.includes(name)).sort();
}

describe('the docs name what the code has', () => {
  it("every local setting is in the README's settings table", () => {
    const table = README.slice(README.indexOf('## Configuration'), README.indexOf('## Other commands'));
    const missing = localSettingNames().filter((name) => !new RegExp(`^\\| [^|]*\`${name}\``, 'm').test(table));
    expect(missing).toEqual([]);
  });

  it("every command group is in the README's command list and every command in operating.md's one-screen table", async () => {
    const paths = (await commandTree()).filter((c) => c.runs).map((c) => c.path);
    const tops = [...new Set(paths.map((path) => path.split(' ')[0]!))];
    const list = README.slice(README.indexOf('## Other commands'));
    expect(tops.filter((top) => !list.includes(`\`${top}`))).toEqual([]);
    const screen = OPERATING.slice(OPERATING.indexOf('## The CLI in one screen'), OPERATING.indexOf('## Which server'));
    expect(paths.filter((path) => !screen.includes(`\`${path}`) && !screen.includes(`\`${path.split(' ')[0]} [`))).toEqual([]);
  });

  it("the README's connect table leads with ChatGPT through the tunnel (local) and the API Gateway URL (AWS), and quotes what to ask the dot", () => {
    const section = README.slice(README.indexOf('## Connecting a client'), README.indexOf('## Configuration'));
    const rows = section.split('\n').filter((line) => line.startsWith('| ') && !line.startsWith('| Client'));
    expect(rows[0]).toMatch(/^\| ChatGPT, this computer \(local\) \| through OpenAI's Secure MCP Tunnel: `dm-dot connect --tunnel TUNNEL_ID`/);
    expect(rows[0]).toContain('(docs/chatgpt.md)');
    expect(rows[1]).toMatch(/^\| ChatGPT, AWS \| the API Gateway URL/);
    expect(unquoted(section)).toContain(DOT_INSTRUCTIONS.subscribe);
    expect(section).toMatch(/DMDOT_INBOX=1[\s\S]*get_pending_messages[\s\S]*acknowledge_messages/);
  });

  it('docs/chatgpt.md quotes both texts for the dot as connect prints them, and names each step', () => {
    expect(unquoted(CHATGPT)).toContain(DOT_INSTRUCTIONS.subscribe);
    expect(unquoted(CHATGPT)).toContain(DOT_INSTRUCTIONS.withInbox);
    for (const step of ['Tunnels: Read', 'tunnel-client', 'dm-dot connect --tunnel', 'Connection**: **Tunnel', 'dm-dot status', 'dm-dot service install']) {
      expect(CHATGPT).toContain(step);
    }
  });

  it('no page says a key rotation has no overlap or changes the subscription id', () => {
    const pages = [
      'README.md',
      ...readdirSync(join(ROOT, 'docs'), { recursive: true, encoding: 'utf8' })
        .filter((f) => f.endsWith('.md'))
        .map((f) => join('docs', f)),
    ];
    const wrong = pages.flatMap((file) =>
      read(file)
        .split(/\n\s*\n/)
        .map((paragraph) => paragraph.replace(/\s+/g, ' '))
        .filter((p) => /there is no overlap|subscription id (is derived from|changes with) the key|changes every subscription id/i.test(p))
        .map((p) => `${file}: ${p.slice(0, 160)}`),
    );
    expect(wrong).toEqual([]);
  });

  it('the Node version the docs and the function construct name is the one the stack deploys', () => {
    const construct = read('lib/constructs/handler-function.ts');
    const deployed = /Runtime\.NODEJS_(\d+)_X/.exec(construct)?.[1];
    expect(deployed).toBeDefined();
    const named = (text: string) => [...text.matchAll(/Node(?:\.js)? (\d+)(?= functions| on arm64)/g)].map((m) => m[1]);
    expect(named(construct)).toEqual([deployed]);
    const aws = named(read('docs/deploying-aws.md'));
    expect(aws.length).toBeGreaterThan(0);
    expect(aws.filter((v) => v !== deployed)).toEqual([]);
  });
});
