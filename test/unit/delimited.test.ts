// Length-delimited message streams (the CLI's export/import format): messages come back whole
// however the bytes are split into reads, a cut stream and a length past the bound are refused.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { DelimitedStreamError, delimited, readDelimited } from "../../services/cli/delimited.ts";

async function* pieces(bytes: Buffer, cuts: number[]) {
  const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  let from = 0;
  for (const p of points) {
    yield bytes.subarray(from, p);
    from = p;
  }
  yield bytes.subarray(from);
}

async function collect(it: AsyncIterable<Uint8Array>): Promise<Buffer[]> {
  const out: Buffer[] = [];
  for await (const m of it) out.push(Buffer.from(m));
  return out;
}

describe("length-delimited streams", () => {
  it("give back every message, whatever the read boundaries", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 6 }), fc.array(fc.nat(), { maxLength: 10 }), async (messages, cuts) => {
        const bytes = Buffer.concat(messages.map(delimited));
        const got = await collect(readDelimited(pieces(bytes, cuts), 1000));
        assert.deepEqual(got, messages.map((m) => Buffer.from(m)));
      }),
      { numRuns: 200 },
    );
  });

  it("refuse a stream cut inside a message", async () => {
    const bytes = Buffer.concat([delimited(Buffer.from("first")), delimited(Buffer.alloc(200, 7))]);
    await assert.rejects(collect(readDelimited(pieces(bytes.subarray(0, bytes.length - 1), [3]), 1000)), (e: unknown) => e instanceof DelimitedStreamError && /ends inside message 1/.test((e as Error).message));
  });

  it("refuse a length above the bound before reading the message", async () => {
    const bytes = delimited(Buffer.alloc(2000, 1));
    await assert.rejects(collect(readDelimited(pieces(bytes, []), 1000)), (e: unknown) => e instanceof DelimitedStreamError && /more than the 1000 allowed/.test((e as Error).message));
  });
});
