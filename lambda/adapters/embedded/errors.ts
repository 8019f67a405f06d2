/**
 * The two ways the embedded database refuses, each a sentence for the operator that names what to do:
 * a live server owns the state directory (`StateDirInUse`: its pid and, once known, its URL), or a
 * file of it cannot be opened or read (`StateUnreadable`: the file; thrown by an open, and by any
 * read or write that meets a damaged page while the file is in use).
 *
 * Deliberately not here: printing or exit codes (the entry point decides), and any file content
 * in a message (a store file holds the subscription's signing secret).
 */

export interface OwnerSummary {
  pid: number;
  /** The server's base URL, once it listens (absent while it is starting). */
  url?: string;
  startedAt: number;
}

export class StateDirInUse extends Error {
  constructor(
    readonly stateDir: string,
    readonly owner: OwnerSummary,
  ) {
    super(
      `the state directory ${stateDir} is in use by another dm-dot server (pid ${owner.pid}${owner.url ? `, ${owner.url}` : ', still starting'}): ` +
        'stop that server first, or give this one its own directory with DMDOT_STATE_DIR',
    );
    this.name = 'StateDirInUse';
  }
}

export class StateUnreadable extends Error {
  constructor(
    /** The file (or directory) that could not be used. */
    readonly file: string,
    readonly problem: string,
    readonly remedy: string,
    options?: { cause?: unknown },
  ) {
    super(`cannot use ${file}: ${problem}. ${remedy}`, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'StateUnreadable';
  }
}
