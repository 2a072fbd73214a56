// A promise that rejects when another does not settle within a time limit. For calls to outside
// services (the fault proxy's HTTP API) that would otherwise hang a caller forever.

/** `p`, or a rejection naming `what` after `ms` milliseconds; the timer is always cleared. */
export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}
