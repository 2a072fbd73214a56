// The codecs refuse malformed and inconsistent states with a DecodeError whose message names the
// problem. Each case starts from a valid message and breaks one thing.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { AWSetLattice, CounterLattice, DecodeError } from "../../services/crdt/index.js";
import {
  AWSetState,
  type CausalContext as ContextMsg,
  CounterState,
} from "../../services/gen/deltaset/v1/types.js";

const dot = (replica: string, counter: bigint) => ({ replica, counter, ttlMs: 0n });
const vv = (...entries: Array<[string, bigint]>): ContextMsg => ({
  vv: entries.map(([replica, counter]) => ({ replica, counter })),
  cloud: [],
});
const entry = (element: string, ...dots: Array<[string, bigint]>) => ({
  element: Buffer.from(element),
  dots: dots.map(([r, c]) => dot(r, c)),
});

function awset(msg: Partial<AWSetState>): Uint8Array {
  return AWSetState.encode({ entries: [], ...msg }).finish();
}

function rejects(decode: () => unknown, pattern: RegExp): void {
  assert.throws(decode, (err: unknown) => {
    assert.ok(err instanceof DecodeError, `expected DecodeError, got ${String(err)}`);
    assert.match(err.message, pattern);
    return true;
  });
}

describe("AWSET decode", () => {
  const good = { entries: [entry("a", ["r1", 1n]), entry("b", ["r1", 2n], ["r2", 1n])], context: vv(["r1", 3n], ["r2", 1n]) };

  it("accepts a valid state", () => {
    const s = AWSetLattice.decode(awset(good));
    assert.deepEqual(s.elements().map(String), ["a", "b"]);
    assert.equal(s.dotCount(), 3);
  });

  it("rejects a dot the context does not cover", () => {
    rejects(
      () => AWSetLattice.decode(awset({ ...good, context: vv(["r1", 1n], ["r2", 1n]) })),
      /entries\[1\]: dot \(r1,2\) is not covered by the context/,
    );
  });

  it("rejects unsorted elements", () => {
    rejects(() => AWSetLattice.decode(awset({ ...good, entries: [good.entries[1]!, good.entries[0]!] })), /entries\[1\]: elements not sorted/);
  });

  it("rejects a repeated element", () => {
    rejects(
      () => AWSetLattice.decode(awset({ ...good, entries: [entry("a", ["r1", 1n]), entry("a", ["r1", 2n])] })),
      /entries\[1\]: elements not sorted and unique/,
    );
  });

  it("rejects a dot under two elements", () => {
    rejects(
      () => AWSetLattice.decode(awset({ ...good, entries: [entry("a", ["r1", 1n]), entry("b", ["r1", 1n])] })),
      /entries\[1\]: dot .*r1.* appears under two elements/,
    );
  });

  it("rejects unsorted or repeated dots within an element", () => {
    rejects(() => AWSetLattice.decode(awset({ ...good, entries: [entry("a", ["r1", 2n], ["r1", 1n])] })), /dots not sorted and unique/);
    rejects(() => AWSetLattice.decode(awset({ ...good, entries: [entry("a", ["r1", 1n], ["r1", 1n])] })), /dots not sorted and unique/);
  });

  it("rejects an empty element", () => {
    rejects(() => AWSetLattice.decode(awset({ ...good, entries: [entry("", ["r1", 1n]), ...good.entries.slice(1)] })), /entries\[0\]: an empty element/);
  });

  it("rejects an element with no dots", () => {
    rejects(() => AWSetLattice.decode(awset({ ...good, entries: [entry("a")] })), /entries\[0\]: an element with no dots/);
  });

  it("rejects a zero counter in a dot, in the version vector and in a range", () => {
    rejects(() => AWSetLattice.decode(awset({ ...good, entries: [entry("a", ["r1", 0n])] })), /counter 0 is outside 1\.\./);
    rejects(() => AWSetLattice.decode(awset({ context: vv(["r1", 0n]) })), /context vv\[0\]: counter 0 is outside/);
    rejects(
      () => AWSetLattice.decode(awset({ context: { vv: [], cloud: [{ replica: "r1", ranges: [{ first: 0n, last: 2n }] }] } })),
      /context cloud\[0\]\.ranges\[0\]: counter 0 is outside/,
    );
  });

  it("rejects counters beyond 2^53 - 1", () => {
    rejects(() => AWSetLattice.decode(awset({ context: vv(["r1", 2n ** 53n]) })), /counter 9007199254740992 is outside/);
  });

  it("rejects overlapping, adjacent and reversed cloud ranges", () => {
    const cloud = (ranges: Array<[bigint, bigint]>, prefix?: bigint): ContextMsg => ({
      vv: prefix === undefined ? [] : [{ replica: "r1", counter: prefix }],
      cloud: [{ replica: "r1", ranges: ranges.map(([first, last]) => ({ first, last })) }],
    });
    rejects(() => AWSetLattice.decode(awset({ context: cloud([[3n, 6n], [5n, 8n]]) })), /ranges\[1\]: overlaps or touches the range before it/);
    rejects(() => AWSetLattice.decode(awset({ context: cloud([[3n, 4n], [5n, 8n]]) })), /ranges\[1\]: overlaps or touches/);
    rejects(() => AWSetLattice.decode(awset({ context: cloud([[4n, 5n]], 3n) })), /ranges\[0\]: overlaps or touches/);
    rejects(() => AWSetLattice.decode(awset({ context: cloud([[6n, 5n]]) })), /ranges\[0\]: last < first/);
    rejects(
      () => AWSetLattice.decode(awset({ context: { vv: [], cloud: [{ replica: "r1", ranges: [] }] } })),
      /context cloud\[0\]: no ranges/,
    );
    // A straggler two above the prefix is fine.
    const ok = AWSetLattice.decode(awset({ context: cloud([[5n, 5n]], 3n) }));
    assert.ok(ok.ctx.contains("r1", 5) && !ok.ctx.contains("r1", 4));
  });

  it("rejects unsorted or repeated replica ids in the context", () => {
    rejects(() => AWSetLattice.decode(awset({ context: vv(["r2", 1n], ["r1", 1n]) })), /context vv: replica ids not sorted and unique at 1/);
    rejects(() => AWSetLattice.decode(awset({ context: vv(["r1", 1n], ["r1", 2n]) })), /context vv: replica ids not sorted and unique/);
  });

  it("rejects empty and over-long replica ids", () => {
    rejects(() => AWSetLattice.decode(awset({ context: vv(["", 1n]) })), /empty replica id/);
    rejects(() => AWSetLattice.decode(awset({ context: vv(["r".repeat(300), 1n]) })), /replica id longer than 256/);
  });

  it("rejects bytes that are not a protobuf message", () => {
    rejects(() => AWSetLattice.decode(Uint8Array.of(0x0a, 0xff, 0xff, 0xff)), /AWSetState: not a valid protobuf message/);
  });
});

describe("COUNTER decode", () => {
  const counter = (msg: Partial<CounterState>) => CounterState.encode({ entries: [], ...msg }).finish();
  const ce = (r: string, c: bigint, positive = 1n, negative = 0n) => ({ dot: dot(r, c), positive, negative });

  it("accepts a valid state", () => {
    const s = CounterLattice.decode(counter({ entries: [ce("a", 2n, 5n, 1n), ce("b", 1n, 0n, 3n)], context: vv(["a", 2n], ["b", 1n]) }));
    assert.equal(s.value(), 1n);
  });

  it("rejects two entries for one replica", () => {
    rejects(
      () => CounterLattice.decode(counter({ entries: [ce("a", 1n), ce("a", 2n)], context: vv(["a", 2n]) })),
      /entries\[1\]: a second entry for replica a/,
    );
  });

  it("rejects entries not sorted by replica", () => {
    rejects(
      () => CounterLattice.decode(counter({ entries: [ce("b", 1n), ce("a", 1n)], context: vv(["a", 1n], ["b", 1n]) })),
      /entries\[1\]: entries not sorted by replica id/,
    );
  });

  it("rejects a dot the context does not cover, a missing dot and a zero counter", () => {
    rejects(() => CounterLattice.decode(counter({ entries: [ce("a", 3n)], context: vv(["a", 2n]) })), /entries\[0\]: dot not covered by the context/);
    rejects(() => CounterLattice.decode(counter({ entries: [{ positive: 1n, negative: 0n }] })), /entries\[0\]: missing dot/);
    rejects(() => CounterLattice.decode(counter({ entries: [ce("a", 0n)], context: vv(["a", 1n]) })), /counter 0 is outside/);
  });

  it("rejects bytes that are not a protobuf message", () => {
    rejects(() => CounterLattice.decode(Uint8Array.of(0x12, 0x05, 0x01)), /CounterState: not a valid protobuf message/);
  });
});
