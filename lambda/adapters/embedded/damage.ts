/**
 * Damaged pages of the LMDB file, at the boundary of every read and write (environment.ts opens
 * each sub-database behind `guard`): a damaged page inside an intact file shows only when it is
 * read, as a value that does not decode (a SyntaxError whose message quotes the bytes) or as an
 * LMDB error (MDB_CORRUPTED, MDB_PAGE_NOTFOUND); both become one StateUnreadable naming the file,
 * never the bytes, and the first one is kept for whoever reports it.
 *
 * Deliberately not here: what to do about one at run time (the caller decides).
 */
import { StateUnreadable } from './errors';
import { damagedPage } from './file-check';

/** The first damaged page met in the file by this process, and who wants to hear of it (once). */
export interface DamageRecord {
  found?: StateUnreadable;
  listeners: Set<(damage: StateUnreadable) => void>;
}

// ---- damaged pages ------------------------------------------------------------------------------

/** LMDB's answers for a page that is not what it should be (lmdb.h): never the caller's mistake. */
const DAMAGE_CODES = new Map<number, string>([
  [-30797, 'MDB_PAGE_NOTFOUND'],
  [-30796, 'MDB_CORRUPTED'],
  [-30795, 'MDB_PANIC'],
  [-30793, 'MDB_INVALID'],
  [-30778, 'MDB_BAD_CHECKSUM'],
]);
/** "Transaction must abort": what every later read of a transaction that met a damaged page gets. */
const MDB_BAD_TXN = -30782;

/**
 * `error` as a damaged page of `file` when it is one (anything else is returned as it was). The
 * first one found is kept in `damage` and told to its listeners; a SyntaxError's own message is
 * dropped, since it quotes the bytes it could not decode.
 */
export function asDamage(file: string, damage: DamageRecord, where: string, error: unknown): unknown {
  if (error instanceof StateUnreadable) return error;
  const code = (error as { code?: unknown } | null)?.code;
  let found: StateUnreadable;
  // By name: lmdb-js may run its decoder in another realm (a test runner's), with its own SyntaxError.
  if ((error as Error | null)?.name === 'SyntaxError') found = damagedPage(file, `a value in ${where} does not decode`);
  else if (typeof code === 'number' && DAMAGE_CODES.has(code)) found = damagedPage(file, `${DAMAGE_CODES.get(code)!} in ${where}`);
  else if (code === MDB_BAD_TXN && damage.found) return damage.found;
  else return error;
  if (!damage.found) {
    damage.found = found;
    for (const listener of [...damage.listeners]) {
      try {
        listener(found);
      } catch {
        // A listener is someone's printing: it must not change what the read answers.
      }
    }
  }
  return found;
}

const RANGES = new Set<PropertyKey>(['getRange', 'getKeys', 'getValues']);

/**
 * The sub-database `name` as its callers use it, with every error of a read or a write passed
 * through `asDamage`, a range's too (a range reads lazily, as it is iterated). The lmdb-js object
 * itself is what each method runs on: a proxy, not a copy, so its state stays in one place.
 */
export function guard<D extends object>(file: string, damage: DamageRecord, name: string, db: D): D {
  const translate = (error: unknown) => asDamage(file, damage, name, error);
  return new Proxy(db, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        let result: unknown;
        try {
          result = (value as (...a: unknown[]) => unknown).apply(target, args);
        } catch (error) {
          throw translate(error);
        }
        return RANGES.has(property) ? guardRange(result as Iterable<unknown>, translate) : result;
      };
    },
  });
}

function guardRange<R extends Iterable<unknown>>(range: R, translate: (error: unknown) => unknown): R {
  return new Proxy(range, {
    get(target, property, receiver) {
      if (property !== Symbol.iterator) return Reflect.get(target, property, receiver);
      return () => {
        const step = <T>(run: () => T): T => {
          try {
            return run();
          } catch (error) {
            throw translate(error);
          }
        };
        // Starting the iteration opens its cursor: that can fail too.
        const inner = step(() => target[Symbol.iterator]());
        const iterator: IterableIterator<unknown> = {
          next: (...args: [] | [undefined]) => step(() => inner.next(...args)),
          return: (value?: unknown) => step(() => inner.return?.(value) ?? { done: true, value }),
          [Symbol.iterator]: () => iterator,
        };
        return iterator;
      };
    },
  });
}

/** `read()`, or undefined when it meets a damaged page (kept in `Databases.damage` already). */
export function unlessDamaged<T>(read: () => T): T | undefined {
  try {
    return read();
  } catch (error) {
    if (error instanceof StateUnreadable) return undefined;
    throw error;
  }
}
