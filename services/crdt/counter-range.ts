// The range a PN-counter must stay in to remain readable: its value travels as a sint64
// (QueryResponse.counter_value, IncrementResponse.value), and each replica's totals as uint64
// but are kept within int64 so that a single component never exceeds what a value can hold.
// The lattice itself works on unbounded integers; these checks sit on its mutators and on the
// store's joins, never inside the join (which must stay a lattice operation).

/** One replica's increments and decrements, each a non-negative total. */
export interface Totals {
  readonly positive: bigint;
  readonly negative: bigint;
}

/** What the range checks read of a counter (a PNCounter is one). */
export interface CounterTotals {
  value(): bigint;
  entryOf(replica: string): { readonly value: Totals } | undefined;
  readonly entries: { values(): Iterable<{ readonly dot: { readonly replica: string }; readonly value: Totals }> };
}

export const INT64_MIN = -(2n ** 63n);
export const INT64_MAX = 2n ** 63n - 1n;

/** An increment or join that would take a counter outside int64. Nothing was changed. */
export class CounterRangeError extends Error {
  override readonly name = "CounterRangeError";
  constructor(message: string) {
    super(message);
  }
}

export const inInt64 = (v: bigint): boolean => v >= INT64_MIN && v <= INT64_MAX;

/** Replica totals after adding amount (a negative amount grows the negative total). */
export function addToTotals(cur: Totals, amount: bigint): Totals {
  return amount >= 0n
    ? { positive: cur.positive + amount, negative: cur.negative }
    : { positive: cur.positive, negative: cur.negative - amount };
}

/**
 * Refuse an increment of counter c by amount at replica when the total it changes, or the value,
 * would leave int64. Only what the increment changes is checked: a counter already out of range
 * (written by an older version) can still be brought back by increments toward zero.
 */
export function checkIncrement(c: CounterTotals, replica: string, amount: bigint): void {
  const cur = c.entryOf(replica)?.value ?? { positive: 0n, negative: 0n };
  const next = addToTotals(cur, amount);
  const changed = amount >= 0n ? next.positive : next.negative;
  if (changed > INT64_MAX) {
    throw new CounterRangeError(
      `this node's ${amount >= 0n ? "increments" : "decrements"} of the counter would total ${changed}, ` +
        `above ${INT64_MAX} (int64)`,
    );
  }
  const value = c.value() + amount;
  if (!inInt64(value)) {
    throw new CounterRangeError(`the counter would be ${value}, outside int64 (${INT64_MIN}..${INT64_MAX})`);
  }
}

/** Why a counter state is out of range, in words (empty when it is in range). */
export function counterRangeProblems(c: CounterTotals): string[] {
  const problems: string[] = [];
  for (const e of c.entries.values()) {
    for (const part of ["positive", "negative"] as const) {
      const v = e.value[part];
      if (v < 0n || v > INT64_MAX) problems.push(`replica ${e.dot.replica}'s ${part} total ${v} is outside 0..${INT64_MAX}`);
    }
  }
  const value = c.value();
  if (!inInt64(value)) problems.push(`value ${value} is outside int64 (${INT64_MIN}..${INT64_MAX})`);
  return problems;
}
