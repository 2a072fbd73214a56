// byteLines (deltaset add --stdin): any split of the input into reads gives the same lines, each
// with its exact bytes (a CR before LF dropped, the last line kept without LF).
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { byteLines } from "../../services/cli/byte-lines.ts";

async function linesOf(pieces: Uint8Array[]): Promise<string[]> {
  const out: string[] = [];
  async function* input() {
    yield* pieces;
  }
  for await (const l of byteLines(input())) out.push(l.toString("hex"));
  return out;
}

describe("byteLines", () => {
  it("splits on LF, drops the CR of CRLF, keeps a last line without LF and bytes that are not UTF-8", async () => {
    assert.deepEqual(await linesOf([Buffer.from([0xff, 0x0a, 0xfe, 0x0d, 0x0a, 0x0a, 0xc3])]), ["ff", "fe", "", "c3"]);
    assert.deepEqual(await linesOf([]), []);
    assert.deepEqual(await linesOf([Buffer.from("a\r\nb\r")]), ["61", "620d"], "a CR not before LF is a byte of the line");
  });

  it("gives the same lines however the input is split into reads", async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 200 }), fc.array(fc.nat(200), { maxLength: 6 }), async (bytes, cuts) => {
        const at = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
        const pieces = [0, ...at, bytes.length].slice(1).map((end, i, a) => bytes.subarray(i === 0 ? 0 : a[i - 1]!, end));
        assert.deepEqual(await linesOf(pieces), await linesOf([bytes]));
        // The lines, joined back with LF, are the input less its trailing LF and the CRs before LFs.
        const expected = Buffer.from(bytes).toString("latin1").replace(/\r\n/g, "\n").replace(/\n$/, "");
        const got = (await linesOf([bytes])).map((h) => Buffer.from(h, "hex").toString("latin1")).join("\n");
        assert.equal(got, expected);
      }),
    );
  });
});
