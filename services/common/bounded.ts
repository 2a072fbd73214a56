// Run an async function over a list with at most `limit` calls running at once.

/**
 * Call fn for every item, at most `limit` at a time, in list order of starting. Resolves once all
 * have finished; if any failed, rejects with the first failure after the running ones settled
 * (no new call starts after a failure).
 */
export async function forEachBounded<T>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<void>): Promise<void> {
  if (items.length === 1) return fn(items[0]!, 0);
  let next = 0;
  let failure: { err: unknown } | undefined;
  const worker = async (): Promise<void> => {
    while (failure === undefined && next < items.length) {
      const i = next++;
      try {
        await fn(items[i]!, i);
      } catch (err) {
        failure ??= { err };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  if (failure !== undefined) throw failure.err;
}
