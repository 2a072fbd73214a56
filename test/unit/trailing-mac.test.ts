// ExchangeStream's messages and PushState's chunks carry their MAC as the last field written, and the MAC covers the
// message's bytes without it: for any frame and reply, the encoding with the MAC is the encoding
// without it followed by exactly that field, and withoutTrailingMac recovers the covered bytes
// from what arrives. A message without a MAC, or whose last bytes are not its MAC, is returned
// whole (so its verification fails).
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { GossipFrame, GossipReply, StateChunk } from "../../services/gen/deltaset/v1/gossip.ts";
import { withTrailingMac, withoutTrailingMac } from "../../services/common/trailing-mac.ts";

const bytes = (min: number, max: number) => fc.uint8Array({ minLength: min, maxLength: max }).map((u) => Buffer.from(u));
const u64 = fc.bigInt({ min: 0n, max: 2n ** 64n - 1n });
const acks = fc.array(fc.record({ partition: fc.nat(1023), seq: u64 }), { maxLength: 4 });
const drops = fc.array(fc.record({ partition: fc.nat(1023), count: u64 }), { maxLength: 3 });
const frameArb = fc.record({
  cluster: fc.string({ maxLength: 12 }),
  from: fc.string({ maxLength: 12 }),
  frameId: u64,
  payloads: fc.array(fc.record({ partition: fc.nat(1023), kind: fc.constantFrom(1, 2), seq: u64, keys: fc.array(fc.record({ key: fc.string({ maxLength: 8 }), state: fc.record({ type: fc.nat(6), payload: bytes(0, 40) }) }), { maxLength: 3 }) }), { maxLength: 3 }),
  acks,
  partitions: fc.nat(4096),
  boot: u64,
  dropped: drops,
});
const replyArb = fc.record({ from: fc.string({ maxLength: 12 }), acks, boot: u64, dropped: drops, frameId: u64 });
const mac = bytes(32, 32);
const contextArb = fc.record({ vv: fc.array(fc.record({ replica: fc.string({ maxLength: 8 }), counter: u64 }), { maxLength: 3 }), cloud: fc.constant([] as never[]) });
const chunkArb = fc.record({
  cluster: fc.string({ maxLength: 12 }),
  from: fc.string({ maxLength: 12 }),
  partition: fc.nat(1023),
  seq: u64,
  key: fc.string({ maxLength: 12 }),
  type: fc.nat(6),
  context: fc.option(contextArb, { nil: undefined }),
  rangeStart: bytes(0, 8),
  rangeEnd: bytes(0, 8),
  rangeOpen: fc.boolean(),
  slice: fc.option(fc.record({ type: fc.nat(6), payload: bytes(0, 40) }), { nil: undefined }),
  keyDone: fc.boolean(),
  partitionDone: fc.boolean(),
  partitions: fc.nat(4096),
  boot: u64,
  delta: fc.boolean(),
  removed: fc.option(contextArb, { nil: undefined }),
  sinceBoot: u64,
  sinceDrops: u64,
});

describe("a stream message's trailing MAC", () => {
  it("GossipFrame: written last as field 9, and stripped back off exactly", () => {
    fc.assert(
      fc.property(frameArb, mac, (f, m) => {
        const bare = Buffer.from(GossipFrame.encode(GossipFrame.fromPartial(f)).finish());
        const sent = Buffer.from(GossipFrame.encode(GossipFrame.fromPartial({ ...f, mac: m })).finish());
        assert.deepEqual(sent, Buffer.concat([bare, Buffer.from([(9 << 3) | 2, 32]), m]));
        assert.deepEqual(withTrailingMac(bare, 9, m), sent);
        assert.deepEqual(Buffer.from(withoutTrailingMac(sent, 9, GossipFrame.decode(sent).mac)), bare);
      }),
      { numRuns: 300 },
    );
  });

  it("GossipReply: written last as field 6, and stripped back off exactly", () => {
    fc.assert(
      fc.property(replyArb, mac, (r, m) => {
        const bare = Buffer.from(GossipReply.encode(GossipReply.fromPartial(r)).finish());
        const sent = Buffer.from(GossipReply.encode(GossipReply.fromPartial({ ...r, mac: m })).finish());
        assert.deepEqual(sent, Buffer.concat([bare, Buffer.from([(6 << 3) | 2, 32]), m]));
        assert.deepEqual(withTrailingMac(bare, 6, m), sent);
        assert.deepEqual(Buffer.from(withoutTrailingMac(sent, 6, GossipReply.decode(sent).mac)), bare);
      }),
      { numRuns: 300 },
    );
  });

  it("StateChunk: written last as field 20 (a two-byte key), and stripped back off exactly", () => {
    fc.assert(
      fc.property(chunkArb, mac, (c, m) => {
        const bare = Buffer.from(StateChunk.encode(StateChunk.fromPartial(c)).finish());
        const sent = Buffer.from(StateChunk.encode(StateChunk.fromPartial({ ...c, mac: m })).finish());
        assert.deepEqual(sent, Buffer.concat([bare, Buffer.from([0xa2, 0x01, 32]), m]));
        assert.deepEqual(withTrailingMac(bare, 20, m), sent);
        assert.deepEqual(Buffer.from(withoutTrailingMac(sent, 20, StateChunk.decode(sent).mac)), bare);
        assert.equal(withoutTrailingMac(bare, 20, StateChunk.decode(bare).mac), bare);
      }),
      { numRuns: 300 },
    );
  });

  it("returns the whole message when there is no MAC, or the last bytes are not the decoded MAC", () => {
    fc.assert(
      fc.property(frameArb, mac, (f, m) => {
        const bare = Buffer.from(GossipFrame.encode(GossipFrame.fromPartial(f)).finish());
        assert.equal(withoutTrailingMac(bare, 9, GossipFrame.decode(bare).mac), bare);
        // A MAC field followed by more bytes: decoded, but not last.
        if (bare.length > 0) {
          const moved = Buffer.concat([Buffer.from([(9 << 3) | 2, 32]), m, bare]);
          assert.equal(withoutTrailingMac(moved, 9, GossipFrame.decode(moved).mac), moved);
        }
        // The wrong field number.
        const sent = Buffer.from(GossipFrame.encode(GossipFrame.fromPartial({ ...f, mac: m })).finish());
        assert.equal(withoutTrailingMac(sent, 6, m), sent);
      }),
      { numRuns: 200 },
    );
  });
});
