/** The server version reported in serverInfo: package.json's, read at build time by the bundler. */
import pkg from '../package.json';

export const version: string = pkg.version;
