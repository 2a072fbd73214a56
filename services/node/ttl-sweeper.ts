// The periodic garbage collection of expired adds (store/expiry.ts): every period, sweep the
// expiry index up to now, in batches, until nothing due is left or the node stops. One sweep runs
// at a time; a failed sweep is logged and the next period tries again.
import type { Logger } from "../common/logger.js";
import type { Store } from "../store/store.js";

export interface TtlSweeperOptions {
  periodMs: number;
  batch: number;
}

export function startTtlSweeper(store: Store, opts: TtlSweeperOptions, log: Logger): { stop(): Promise<void> } {
  let stopped = false;
  let running: Promise<void> | undefined;
  const sweep = async () => {
    try {
      let more = true;
      while (more && !stopped) {
        const r = await store.expire(store.now(), opts.batch);
        more = r.more;
        if (r.dots > 0) log.debug("expired adds removed", { dots: r.dots });
      }
    } catch (err) {
      if (!stopped) log.warn("expiry sweep failed; the next one retries", { error: (err as Error).message });
    }
  };
  const timer = setInterval(() => {
    if (running === undefined) running = sweep().finally(() => (running = undefined));
  }, opts.periodMs);
  timer.unref();
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
