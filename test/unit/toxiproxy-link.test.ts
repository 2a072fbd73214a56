// Toxic behaviour on one direction of a connection, driven by a manual clock: exact release
// times, order, byte-exact delivery, closes and resets, and live add/update/remove of toxics.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";

import { Link, type LinkSink } from "../../services/chaos/proxy/link.ts";
import { ManualClock } from "../../services/chaos/proxy/manual-clock.ts";
import { parseNewToxic, type ToxicSpec } from "../../services/chaos/proxy/toxic-spec.ts";

type Event = { t: number; kind: "data"; data: string } | { t: number; kind: "end" | "close" | "reset" };

function recorder(clock: ManualClock): { sink: LinkSink; events: Event[]; text: () => string } {
  const events: Event[] = [];
  const sink: LinkSink = {
    write: (data) => events.push({ t: clock.now(), kind: "data", data: data.toString("latin1") }),
    end: () => events.push({ t: clock.now(), kind: "end" }),
    close: () => events.push({ t: clock.now(), kind: "close" }),
    reset: () => events.push({ t: clock.now(), kind: "reset" }),
  };
  const text = () =>
    events.map((e) => (e.kind === "data" ? e.data : "")).join("");
  return { sink, events, text };
}

function toxic(type: string, attributes: Record<string, number>, extra: Record<string, unknown> = {}): ToxicSpec {
  return parseNewToxic({ type, attributes, ...extra }, () => false);
}

const bytes = (s: string) => Buffer.from(s, "latin1");

describe("link without toxics", () => {
  it("passes data and EOF straight through", () => {
    const clock = new ManualClock();
    const r = recorder(clock);
    const link = new Link([], r.sink, clock);
    link.write(bytes("abc"));
    link.end();
    assert.deepEqual(r.events, [
      { t: 0, kind: "data", data: "abc" },
      { t: 0, kind: "end" },
    ]);
    assert.equal(link.bufferedBytes, 0);
  });
});

describe("latency", () => {
  it("releases each chunk `latency` ms after it arrived, in order, then EOF", () => {
    const clock = new ManualClock();
    const r = recorder(clock);
    const link = new Link([toxic("latency", { latency: 100 })], r.sink, clock);
    link.write(bytes("a"));
    clock.advance(10);
    link.write(bytes("b"));
    link.end();
    clock.advance(89);
    assert.deepEqual(r.events, [], "nothing before 100 ms");
    assert.equal(link.bufferedBytes, 2);
    clock.advance(1);
    assert.deepEqual(r.events, [{ t: 100, kind: "data", data: "a" }]);
    clock.advance(10);
    assert.deepEqual(r.events.slice(1), [
      { t: 110, kind: "data", data: "b" },
      { t: 110, kind: "end" },
    ]);
    assert.equal(link.bufferedBytes, 0);
  });

  it("adds jitter in [-jitter, jitter) without letting a chunk overtake the one before it", () => {
    // random 0.99 → +49 ms on the first chunk; random 0 → -50 ms on the second.
    const clock = new ManualClock([0.5, 0.99, 0]);
    const r = recorder(clock);
    const link = new Link([toxic("latency", { latency: 100, jitter: 50 })], r.sink, clock);
    link.write(bytes("a"));
    clock.advance(1);
    link.write(bytes("b"));
    clock.advance(1000);
    assert.deepEqual(
      r.events.map((e) => [e.t, e.kind === "data" ? e.data : e.kind]),
      [
        [149, "a"],
        [149, "b"],
      ],
    );
  });
});

describe("bandwidth", () => {
  it("delivers `rate` KB/s in pieces of at most 100 ms worth", () => {
    const clock = new ManualClock();
    const r = recorder(clock);
    const link = new Link([toxic("bandwidth", { rate: 10 })], r.sink, clock); // 10 bytes per ms
    const data = "x".repeat(2500);
    link.write(bytes(data));
    clock.advance(99);
    assert.equal(r.events.length, 0);
    clock.advance(1000);
    assert.deepEqual(
      r.events.map((e) => [e.t, e.kind === "data" ? e.data.length : e.kind]),
      [
        [100, 1000],
        [200, 1000],
        [250, 500],
      ],
    );
    assert.equal(r.text(), data);
  });

  it("rate 0 means unlimited", () => {
    const clock = new ManualClock();
    const r = recorder(clock);
    const link = new Link([toxic("bandwidth", { rate: 0 })], r.sink, clock);
    link.write(bytes("hello"));
    assert.equal(r.text(), "hello");
  });
});

describe("slicer", () => {
  it("cuts data into average_size pieces `delay` µs apart", () => {
    const clock = new ManualClock();
    const r = recorder(clock);
    const link = new Link([toxic("slicer", { average_size: 10, size_variation: 0, delay: 2000 })], r.sink, clock);
    link.write(bytes("0123456789abcdefghijABCDEFGHIJxyz!?"));
    clock.advance(100);
    assert.deepEqual(
      r.events.map((e) => [e.t, e.kind === "data" ? e.data : e.kind]),
      [
        [0, "0123456789"],
        [2, "abcdefghij"],
        [4, "ABCDEFGHIJ"],
        [6, "xyz!?"],
      ],
    );
  });

  it("delivers exactly the input, in pieces within average ± variation (property)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ minLength: 1, maxLength: 300 }), { minLength: 1, maxLength: 5 }),
        fc.integer({ min: 1, max: 40 }),
        fc.integer({ min: 0, max: 20 }),
        fc.integer({ min: 0, max: 3000 }),
        fc.array(fc.double({ min: 0, max: 0.999, noNaN: true }), { maxLength: 50 }),
        (chunks, average, variationRaw, delay, randoms) => {
          const variation = Math.min(variationRaw, average - 1);
          const clock = new ManualClock([1 - 1e-9, ...randoms]); // first draw: toxicity
          const r = recorder(clock);
          const link = new Link([toxic("slicer", { average_size: average, size_variation: variation, delay })], r.sink, clock);
          for (const c of chunks) link.write(Buffer.from(c));
          link.end();
          clock.advance(1_000_000);
          const input = Buffer.concat(chunks.map((c) => Buffer.from(c))).toString("latin1");
          assert.equal(r.text(), input);
          assert.equal(r.events.at(-1)?.kind, "end");
          // every piece except the last of each input chunk is within average ± variation
          let chunkIndex = 0;
          let left = chunks[0]!.length;
          for (const e of r.events) {
            if (e.kind !== "data") continue;
            assert.ok(e.data.length <= average + variation);
            left -= e.data.length;
            if (left > 0) assert.ok(e.data.length >= Math.max(1, average - variation));
            else left = chunks[++chunkIndex]?.length ?? 0;
          }
        },
      ),
      { numRuns: 100 },
    );
  });
});

describe("slow_close", () => {
  it("passes data at once and holds EOF for `delay` ms", () => {
    const clock = new ManualClock();
    const r = recorder(clock);
    const link = new Link([toxic("slow_close", { delay: 50 })], r.sink, clock);
    link.write(bytes("hi"));
    link.end();
    assert.deepEqual(r.events, [{ t: 0, kind: "data", data: "hi" }]);
    clock.advance(50);
    assert.deepEqual(r.events[1], { t: 50, kind: "end" });
  });
});

describe("timeout", () => {
  it("drops all data and closes the connection after `timeout` ms", () => {
    const clock = new ManualClock();
    const r = recorder(clock);
    const link = new Link([toxic("timeout", { timeout: 100 })], r.sink, clock);
    link.write(bytes("lost"));
    clock.advance(99);
    assert.deepEqual(r.events, []);
    assert.equal(link.bufferedBytes, 0, "dropped data is not held");
    clock.advance(1);
    assert.deepEqual(r.events, [{ t: 100, kind: "close" }]);
    link.write(bytes("after"));
    assert.equal(r.events.length, 1);
  });

  it("with timeout 0 holds the connection open, dropping data, until removed; removal closes", () => {
    const clock = new ManualClock();
    const r = recorder(clock);
    const link = new Link([toxic("timeout", { timeout: 0 })], r.sink, clock);
    link.write(bytes("lost"));
    clock.advance(60_000);
    assert.deepEqual(r.events, []);
    link.removeToxic("timeout_downstream");
    assert.deepEqual(r.events, [{ t: 60_000, kind: "close" }]);
  });

  it("added to a live link stops data from then on", () => {
    const clock = new ManualClock();
    const r = recorder(clock);
    const link = new Link([], r.sink, clock);
    link.write(bytes("before"));
    link.addToxic(toxic("timeout", { timeout: 0 }));
    link.write(bytes("during"));
    clock.advance(1000);
    assert.equal(r.text(), "before");
  });
});

describe("reset_peer", () => {
  it("resets `timeout` ms after the first input, delivering nothing", () => {
    const clock = new ManualClock();
    const r = recorder(clock);
    const link = new Link([toxic("reset_peer", { timeout: 20 })], r.sink, clock);
    clock.advance(5);
    assert.equal(clock.pendingTimers, 0, "idle until data arrives");
    link.write(bytes("x"));
    clock.advance(19);
    assert.deepEqual(r.events, []);
    clock.advance(1);
    assert.deepEqual(r.events, [{ t: 25, kind: "reset" }]);
  });

  it("with timeout 0 resets on the first input", () => {
    const clock = new ManualClock();
    const r = recorder(clock);
    const link = new Link([toxic("reset_peer", { timeout: 0 })], r.sink, clock);
    link.write(bytes("x"));
    assert.deepEqual(r.events, [{ t: 0, kind: "reset" }]);
  });
});

describe("limit_data", () => {
  it("delivers exactly `bytes` bytes then closes", () => {
    const clock = new ManualClock();
    const r = recorder(clock);
    const link = new Link([toxic("limit_data", { bytes: 10 })], r.sink, clock);
    link.write(bytes("abcd"));
    link.write(bytes("efgh"));
    link.write(bytes("ijkl"));
    assert.equal(r.text(), "abcdefghij");
    assert.equal(r.events.at(-1)?.kind, "close");
    assert.equal(link.bufferedBytes, 0);
  });

  it("keeps its count when the toxic is updated", () => {
    const clock = new ManualClock();
    const r = recorder(clock);
    const spec = toxic("limit_data", { bytes: 10 });
    const link = new Link([spec], r.sink, clock);
    link.write(bytes("abcdef"));
    link.updateToxic({ ...spec, attributes: { bytes: 8 } });
    link.write(bytes("ghij"));
    assert.equal(r.text(), "abcdefgh");
    assert.equal(r.events.at(-1)?.kind, "close");
  });
});

describe("toxicity", () => {
  it("toxicity 0 never applies, whatever the draw", () => {
    for (const draw of [0, 0.3, 0.999999]) {
      const clock = new ManualClock([draw]);
      const r = recorder(clock);
      const link = new Link([toxic("timeout", { timeout: 0 }, { toxicity: 0 })], r.sink, clock);
      link.write(bytes("ok"));
      assert.equal(r.text(), "ok");
    }
  });

  it("applies when the connection's draw is below the toxicity", () => {
    const applied = new ManualClock([0.49]);
    const missed = new ManualClock([0.5]);
    const ra = recorder(applied);
    const rm = recorder(missed);
    new Link([toxic("timeout", { timeout: 0 }, { toxicity: 0.5 })], ra.sink, applied).write(bytes("x"));
    new Link([toxic("timeout", { timeout: 0 }, { toxicity: 0.5 })], rm.sink, missed).write(bytes("x"));
    assert.equal(ra.text(), "");
    assert.equal(rm.text(), "x");
  });
});

describe("live changes", () => {
  it("updating latency re-plans held chunks under the new value", () => {
    const clock = new ManualClock();
    const r = recorder(clock);
    const spec = toxic("latency", { latency: 1000 });
    const link = new Link([spec], r.sink, clock);
    link.write(bytes("a"));
    clock.advance(100);
    link.updateToxic({ ...spec, attributes: { latency: 300, jitter: 0 } });
    clock.advance(199);
    assert.equal(r.text(), "");
    clock.advance(1);
    assert.deepEqual(r.events, [{ t: 300, kind: "data", data: "a" }]);
  });

  it("removing a toxic hands its held data on in order, ahead of later data", () => {
    const clock = new ManualClock();
    const r = recorder(clock);
    const link = new Link(
      [toxic("latency", { latency: 500 }, { name: "slow" }), toxic("latency", { latency: 10 }, { name: "fast" })],
      r.sink,
      clock,
    );
    link.write(bytes("1"));
    link.write(bytes("2"));
    clock.advance(100);
    link.removeToxic("slow");
    link.write(bytes("3"));
    clock.advance(9);
    assert.equal(r.text(), "");
    clock.advance(1);
    assert.equal(r.text(), "123");
    assert.ok(r.events.every((e) => e.t === 110));
  });

  it("a toxic added to a live link goes to the end of the chain", () => {
    const clock = new ManualClock();
    const r = recorder(clock);
    const link = new Link([toxic("latency", { latency: 100 })], r.sink, clock);
    link.write(bytes("abcdef"));
    link.addToxic(toxic("limit_data", { bytes: 3 }));
    clock.advance(100);
    assert.equal(r.text(), "abc");
    assert.equal(r.events.at(-1)?.kind, "close");
  });

  it("dispose stops every timer", () => {
    const clock = new ManualClock();
    const r = recorder(clock);
    const link = new Link([toxic("latency", { latency: 100 }), toxic("timeout", { timeout: 50 }, { stream: "downstream", name: "t" })], r.sink, clock);
    link.write(bytes("a"));
    link.dispose();
    assert.equal(clock.pendingTimers, 0);
    clock.advance(1000);
    assert.deepEqual(r.events, []);
  });
});
