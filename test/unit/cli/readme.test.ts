/**
 * The README's commands as a new user copies them, line by line: each code block runs as printed
 * on the README's minimum Node, and none of them waits forever in front of another. (That the
 * alias line runs the CLI, and that nothing runs it through npx, is in bundle.test.ts.)
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../../support/paths';

const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
/** The fenced shell blocks, each as its lines. */
const SHELL_BLOCKS = [...README.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!.split('\n').filter(Boolean));
const lineWith = (text: string) => README.split('\n').find((line) => line.includes(text));

describe('the README as printed', () => {
  it('stays short: at most 250 lines', () => {
    expect(README.split('\n').length).toBeLessThanOrEqual(250);
  });

  it('npm start, which never returns, is a block of its own: npm test is copied into a second terminal', () => {
    const start = SHELL_BLOCKS.find((block) => block.some((line) => /^npm ci && npm start\b/.test(line)));
    expect(start).toHaveLength(1);
    const test = SHELL_BLOCKS.find((block) => block.some((line) => /^npm test\b/.test(line)));
    expect(test).toHaveLength(1);
    expect(README).toMatch(/## Set-up: two commands/);
  });

  it('the curl line follows PORT as npm start does, and says why when it cannot connect (-sS, not -s alone)', () => {
    const curl = lineWith('curl -');
    expect(curl).toBeDefined();
    expect(curl).toContain('http://127.0.0.1:${PORT:-8787}/v1/messages');
    expect(curl).toMatch(/curl -sS /);
  });

  it("every CDK command is the project's pinned CLI (npx cdk), never a global cdk", () => {
    const bare = README.split('\n').filter(
      (line) =>
        /(^|[\s`])cdk (deploy|destroy|bootstrap|synth)\b/.test(line) &&
        !/npx cdk (deploy|destroy|bootstrap|synth)/.test(line) &&
        !/npm run synth|offline, quiet `cdk synth`/.test(line),
    );
    expect(bare).toEqual([]);
    expect(README).toContain('npx cdk deploy DmDot');
  });

  it('the MCP Inspector line pins 0.15.x (the last line that runs on Node 20) and passes the key in the URL, since 0.15 has no --header', () => {
    const inspector = lineWith('@modelcontextprotocol/inspector');
    expect(inspector).toMatch(
      /npx @modelcontextprotocol\/inspector@0\.15\.\d+ --cli "http:\/\/127\.0\.0\.1:8787\/mcp\?key=\$\(cat \.dm-dot\/api-key\)" --transport http --method tools\/list/,
    );
    expect(inspector).not.toContain('--header');
  });
});
