#!/usr/bin/env node
// The `dm-dot` executable (package.json "bin"): loads the TypeScript CLI through tsx, runs it,
// and exits with its code. Deliberately nothing else: see lambda/cli/main.ts.
import { tsImport } from 'tsx/esm/api';

const cli = await tsImport('./main.ts', import.meta.url);
const { main, processIo } = cli.main ? cli : cli.default;
const io = processIo();
const code = await main(process.argv.slice(2), io);
// Flush stdout before leaving (a pipe may still hold output), then exit even if a handle lingers.
process.stdout.write('', () => process.exit(code));
