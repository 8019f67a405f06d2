/**
 * How every command prints: `--json` pretty-printed the same way everywhere (two-space indent, a
 * final newline), aligned tables and fields, times.
 *
 * Deliberately not here: scrubbing (context.ts) and what a command prints.
 */

/** The one JSON format of the CLI. */
export function jsonText(doc: unknown): string {
  return `${JSON.stringify(doc, null, 2)}\n`;
}

/** Pads columns to the widest cell; the last column is not padded. */
export function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return `${[line(headers), ...rows.map(line)].join('\n')}\n`;
}

/** Two columns, field and value, without a header: `status` and `subscription show`. */
export function fields(rows: readonly (readonly [string, string])[]): string {
  const width = Math.max(...rows.map(([k]) => k.length));
  return `${rows.map(([k, v]) => `${k.padEnd(width)}  ${v}`.trimEnd()).join('\n')}\n`;
}

/** An ISO time (or epoch milliseconds) as ISO without milliseconds, or '-' for none. */
export function shortTime(at: string | number | null | undefined): string {
  if (typeof at === 'number') at = new Date(at).toISOString();
  return at ? at.replace(/\.\d{3}Z$/, 'Z') : '-';
}

/** "in 3 days", "in 5 min", "2 h ago": beside a time, for a person. */
export function relative(iso: string, now = Date.now()): string {
  const ms = Date.parse(iso) - now;
  const abs = Math.abs(ms);
  const [n, unit] =
    abs >= 86_400_000 ? [abs / 86_400_000, 'd'] : abs >= 3_600_000 ? [abs / 3_600_000, 'h'] : abs >= 60_000 ? [abs / 60_000, 'min'] : [abs / 1000, 's'];
  const amount = `${Math.round(n)} ${unit}`;
  return ms >= 0 ? `in ${amount}` : `${amount} ago`;
}

export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}
