// Poll until a condition holds, or fail with the last value seen (bounded in time).
import { strict as assert } from "node:assert";

export async function eventually<T>(
  what: string,
  fn: () => Promise<T>,
  ok: (v: T) => boolean,
  timeoutMs = 15_000,
  onTimeout?: () => void,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: T | undefined;
  let lastErr: unknown;
  while (Date.now() < end) {
    try {
      last = await fn();
      if (ok(last)) return last;
    } catch (err) {
      lastErr = err;
    }
    await new Promise((r) => setTimeout(r, 150));
  }
  onTimeout?.();
  assert.fail(`${what} did not happen within ${timeoutMs} ms; last value: ${JSON.stringify(last, (_k, v) => (v instanceof Map ? [...v] : typeof v === "bigint" ? v.toString() : v))} ${lastErr ?? ""}`);
}
