/**
 * Where the repository is, for tests that read sources, spawn entry points or build bundles.
 * One definition, so a test file can move between folders without its paths going wrong.
 */
import { resolve } from 'node:path';

export const ROOT = resolve(__dirname, '..', '..');
