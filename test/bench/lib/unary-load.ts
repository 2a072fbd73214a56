// The unary load of the client-API benchmarks: 32 single-element Adds in flight over the given
// channels, each call the next as soon as the one before it is answered.
import { call, type replicaClient } from "../../../services/client/rpc.ts";

type Client = ReturnType<typeof replicaClient>;

/** 32 single-element Adds in flight over the channels for `seconds`; returns calls/s. */
export async function unaryRate(channels: Client[], seconds: number, tag: string): Promise<number> {
  let ops = 0;
  const start = performance.now();
  const end = start + seconds * 1000;
  await Promise.all(
    Array.from({ length: 32 }, async (_, w) => {
      const c = channels[w % channels.length]!;
      for (let i = 0; performance.now() < end; i++) {
        await call(c, c.add, { key: `${tag}-${w % 8}`, elements: [Buffer.from(`${tag}-${w}-${i}`)], texts: [] });
        ops++;
      }
    }),
  );
  return ops / ((performance.now() - start) / 1000);
}
