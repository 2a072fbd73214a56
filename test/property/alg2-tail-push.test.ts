// Tail pushes (algorithm2.ts): pushes that carry only what was never sent to a neighbour, beside
// the periods' whole unacknowledged intervals. Under any interleaving of local changes, periods,
// pushes (some never sent, some whose call fails, delivered or not: tailNotSent), and deliveries
// of frames and acks that are reordered, duplicated or lost:
//  - safety: A(j) never passes a delta the neighbour does not hold (an ack promises everything
//    below A(j) is there, and GC drops what every neighbour acked);
//  - liveness: once links behave, periods bring A(j) to c;
//  - holdsRange(j, from, to), which writes asking for copies count, is true only of deltas j holds.
// The payload is the set of delta seqs, so what the neighbour holds is exactly what arrived.
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { Alg2Partition, TAIL_LABELS } from "../../services/gossip/algorithm2.js";
import type { PayloadOps } from "../../services/gossip/payload.js";

type Ids = ReadonlySet<number>;
const ops: PayloadOps<Ids> = {
  bottom: () => new Set(),
  join: (a, b) => new Set([...a, ...b]),
  isBottom: (p) => p.size === 0,
  sizeBytes: (p) => p.size * 8,
};

type Step =
  | { kind: "local" }
  | { kind: "period" }
  | { kind: "push" }
  /** A push the caller did not send (the peer was busy), or whose call fails later. */
  | { kind: "pushUnsent" }
  | { kind: "pushFailing" }
  /** A failing call ends: its frame may have arrived, its reply never does. */
  | { kind: "fail"; pick: number; arrived: boolean }
  | { kind: "deliver"; pick: number; duplicate: boolean }
  | { kind: "lose"; pick: number }
  | { kind: "ack"; pick: number; duplicate: boolean }
  | { kind: "loseAck"; pick: number }
  | { kind: "fromPeer" }
  /** A push of one write's interval alone (planRange), as beside a full state j needs. */
  | { kind: "range"; from: number; length: number }
  /** The buffer's budget drops its oldest deltas: j falls below its start and needs a full state. */
  | { kind: "trim"; keep: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.constant({ kind: "local" as const }) },
  { weight: 2, arbitrary: fc.constant({ kind: "period" as const }) },
  { weight: 3, arbitrary: fc.constant({ kind: "push" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "pushUnsent" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "pushFailing" as const }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("fail" as const), pick: fc.nat(), arrived: fc.boolean() }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("deliver" as const), pick: fc.nat(), duplicate: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("lose" as const), pick: fc.nat() }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("ack" as const), pick: fc.nat(), duplicate: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("loseAck" as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.constant({ kind: "fromPeer" as const }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("range" as const), from: fc.nat(), length: fc.integer({ min: 1, max: 3 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("trim" as const), keep: fc.nat(4) }) },
);

test("tail pushes: A(j) never passes what the neighbour holds, and periods bring it to c", () => {
  fc.assert(
    // A restarted node starts past 0 with an empty buffer: its first sends are full states.
    fc.property(fc.array(step, { maxLength: 200 }), fc.boolean(), fc.nat(3), (steps, bp, initialSeq) => {
      const part = new Alg2Partition(ops, 0, initialSeq);
      const held = new Set<number>(); // what neighbour j holds
      const frames: Array<{ seq: number; ids: Ids }> = []; // in flight to j
      const acks: number[] = []; // in flight back
      const failing: Array<{ seq: number; ids: Ids }> = []; // tail pushes whose calls will fail
      const send = (plan: ReturnType<typeof part.plan>) => {
        if (plan.kind === "delta") frames.push({ seq: plan.seq, ids: plan.payload });
        // A full state carries every delta below its seq.
        if (plan.kind === "state") frames.push({ seq: plan.seq, ids: new Set(Array.from({ length: plan.seq }, (_, i) => i)) });
      };
      const check = () => {
        const a = part.ackOf("j");
        for (let l = 0; l < a; l++) assert.ok(held.has(l), `A(j) = ${a} but j lacks delta ${l}`);
        // What a write asking for copies counts: never an interval with a delta j lacks.
        for (let from = 0; from < part.seq; from++) {
          for (let to = from + 1; to <= part.seq; to++) {
            if (!part.holdsRange("j", from, to)) continue;
            for (let l = from; l < to; l++) assert.ok(held.has(l), `holdsRange(j, ${from}, ${to}) but j lacks delta ${l}`);
          }
        }
      };
      for (const s of steps) {
        switch (s.kind) {
          case "local": {
            const seq = part.seq;
            part.append(new Set([seq]), "self");
            break;
          }
          case "fromPeer": {
            // A delta j made and sent here: j holds it (BP never sends it back).
            const seq = part.seq;
            part.append(new Set([seq]), "j");
            held.add(seq);
            break;
          }
          case "period":
            send(part.plan("j", bp));
            part.gc(["j"]);
            break;
          case "push":
            send(part.planTail("j", bp, 4));
            break;
          case "pushUnsent": {
            const plan = part.planTail("j", bp, 4);
            if (plan.kind === "delta") part.tailNotSent("j", plan.seq);
            break;
          }
          case "range": {
            // An interval inside what is buffered now (planRange refuses others).
            const first = part.bufferEntries[0]?.seq ?? part.seq;
            const from = first + (s.from % Math.max(1, part.seq - first));
            send(part.planRange("j", from, Math.min(part.seq, from + s.length), bp, 4));
            break;
          }
          case "trim":
            part.enforceLimit(s.keep * 8);
            break;
          case "pushFailing": {
            const plan = part.planTail("j", bp, 4);
            if (plan.kind === "delta") failing.push({ seq: plan.seq, ids: plan.payload });
            break;
          }
          case "fail": {
            if (failing.length === 0) break;
            const [f] = failing.splice(s.pick % failing.length, 1);
            if (s.arrived) for (const id of f!.ids) held.add(id);
            part.tailNotSent("j", f!.seq);
            break;
          }
          case "deliver":
          case "lose": {
            if (frames.length === 0) break;
            const i = s.pick % frames.length;
            const f = frames[i]!;
            if (s.kind === "lose" || !s.duplicate) frames.splice(i, 1);
            if (s.kind === "deliver") {
              for (const id of f.ids) held.add(id);
              acks.push(f.seq);
            }
            break;
          }
          case "ack":
          case "loseAck": {
            if (acks.length === 0) break;
            const i = s.pick % acks.length;
            const n = acks[i]!;
            if (s.kind === "loseAck" || !s.duplicate) acks.splice(i, 1);
            if (s.kind === "ack") assert.ok(part.ack("j", n));
            break;
          }
        }
        check();
      }
      // Links behave from here: periods alone bring A(j) to c.
      for (const f of failing.splice(0)) part.tailNotSent("j", f.seq);
      frames.length = 0;
      acks.length = 0;
      for (let round = 0; round < 3 && part.ackOf("j") < part.seq; round++) {
        // (a full state when GC or a restart left j below the buffer)
        const plan = part.plan("j", bp);
        send(plan);
        for (const f of frames.splice(0)) {
          for (const id of f.ids) held.add(id);
          part.ack("j", f.seq);
        }
        check();
      }
      assert.equal(part.ackOf("j"), part.seq);
      for (let l = 0; l < part.seq; l++) assert.ok(held.has(l), `j lacks delta ${l} after the links healed`);
    }),
    {
      numRuns: 500,
      // Always run: a push's repeated ack, after a restart (c = 1, nothing buffered below) and
      // after a lost push, once taken for an ack of everything below c.
      examples: [
        [[{ kind: "local" }, { kind: "push" }, { kind: "deliver", pick: 0, duplicate: false }, { kind: "ack", pick: 0, duplicate: true }, { kind: "ack", pick: 0, duplicate: false }], false, 1],
        [[{ kind: "local" }, { kind: "push" }, { kind: "lose", pick: 0 }, { kind: "local" }, { kind: "push" }, { kind: "deliver", pick: 0, duplicate: false }, { kind: "ack", pick: 0, duplicate: true }, { kind: "ack", pick: 0, duplicate: false }], false, 0],
      ],
    },
  );
});

test("tail pushes send only what was never sent, and their acks join A(j) in any order", () => {
  const part = new Alg2Partition(ops, 0, 0);
  part.append(new Set([0]), "self");
  const p1 = part.planTail("j", true, 8);
  part.append(new Set([1]), "self");
  const p2 = part.planTail("j", true, 8);
  part.append(new Set([2]), "self");
  const p3 = part.planTail("j", true, 8);
  assert.deepEqual([p1, p2, p3].map((p) => (p.kind === "delta" ? [...p.payload] : p.kind)), [[0], [1], [2]]);
  // Each push's seq is a label of its own, above any c, so its ack names it.
  const [s1, s2, s3] = [p1, p2, p3].map((p) => p.kind === "delta" ? p.seq : -1);
  assert.ok(s1! >= TAIL_LABELS && s2! > s1! && s3! > s2!, "tail pushes carry distinct labels above every c");
  // The last push is acked first: j holds [2, 3) only, so A(j) stays.
  assert.ok(part.ack("j", s3!));
  assert.equal(part.ackOf("j"), 0);
  assert.ok(part.ack("j", s2!));
  assert.equal(part.ackOf("j"), 0);
  // A repeated ack of a push is known for what it is: it promises that push's deltas, not all below c.
  assert.ok(part.ack("j", s2!));
  assert.equal(part.ackOf("j"), 0);
  // The first push's ack joins all three ranges.
  assert.ok(part.ack("j", s1!));
  assert.equal(part.ackOf("j"), 3);
  // A label never sent is refused.
  assert.equal(part.ack("j", s3! + 1), false);
  // Nothing new: no push; a period sends nothing either.
  assert.equal(part.planTail("j", true, 8).kind, "none");
  assert.equal(part.plan("j", true).kind, "none");
});

test("a lost tail push is sent again by the period, whole interval from A(j)", () => {
  const part = new Alg2Partition(ops, 0, 0);
  part.append(new Set([0]), "self");
  part.planTail("j", true, 8); // lost
  part.append(new Set([1]), "self");
  const p2 = part.planTail("j", true, 8);
  assert.ok(p2.kind === "delta" && [...p2.payload].join() === "1");
  assert.ok(part.ack("j", p2.seq)); // j holds [1, 2) only
  assert.equal(part.ackOf("j"), 0);
  // Repeated (an at-least-once link), the push's ack still promises [1, 2) only.
  assert.ok(part.ack("j", p2.seq));
  assert.equal(part.ackOf("j"), 0);
  const period = part.plan("j", true);
  assert.ok(period.kind === "delta" && [...period.payload].sort().join() === "0,1");
  assert.ok(part.ack("j", period.seq));
  assert.equal(part.ackOf("j"), 2);
});

test("a tail push that was not sent goes again with the next push, not a period later", () => {
  const part = new Alg2Partition(ops, 0, 0);
  part.append(new Set([0]), "self");
  const unsent = part.planTail("j", true, 8);
  assert.equal(unsent.kind, "delta");
  part.tailNotSent("j", unsent.seq);
  part.append(new Set([1]), "self");
  const next = part.planTail("j", true, 8);
  assert.ok(next.kind === "delta" && [...next.payload].sort().join() === "0,1", "the next push carries the unsent delta");
  assert.ok(part.ack("j", next.seq));
  assert.equal(part.ackOf("j"), 2);
  // Once acked, a late report of a failure changes nothing.
  part.tailNotSent("j", next.seq);
  assert.equal(part.planTail("j", true, 8).kind, "none");
  assert.equal(part.ackOf("j"), 2);
});

test("tail pushes stop at the in-flight bound until acks come back", () => {
  const part = new Alg2Partition(ops, 0, 0);
  for (let i = 0; i < 3; i++) {
    part.append(new Set([i]), "self");
    assert.equal(part.planTail("j", true, 2).kind, i < 2 ? "delta" : "none");
  }
  assert.ok(part.ack("j", 1));
  assert.equal(part.planTail("j", true, 2).kind, "delta");
});

test("tail pushes acked while A(j) is stuck keep one pending range, and A(j) takes it when it moves", () => {
  const part = new Alg2Partition(ops, 0, 0);
  let n = 0;
  const local = () => part.append(new Set([n++]), "self");
  local();
  const lost = part.plan("j", false); // its frame is lost: A(j) stays at 0
  assert.equal(lost.kind, "delta");
  for (let i = 0; i < 200; i++) {
    local();
    const push = part.planTail("j", false, 4);
    assert.equal(push.kind, "delta");
    assert.ok(part.ack("j", push.seq));
    assert.equal(part.ackOf("j"), 0);
    assert.equal(part.pendingRanges("j"), 1, `after ${i + 1} acked pushes`);
  }
  const again = part.plan("j", false);
  assert.equal(again.kind, "delta");
  assert.ok(part.ack("j", again.seq));
  assert.equal(part.ackOf("j"), part.seq);
  assert.equal(part.pendingRanges("j"), 0);
});

test("holdsRange: deltas carried by an acknowledged tail push are held though A(j) is stuck below them", () => {
  const part = new Alg2Partition(ops, 0, 0);
  part.append(new Set([0]), "self");
  part.plan("j", false); // lost: A(j) stays at 0
  part.append(new Set([1]), "self");
  part.append(new Set([2]), "self");
  const push = part.planTail("j", false, 4);
  assert.ok(push.kind === "delta" && [...push.payload].sort().join() === "1,2");
  assert.equal(part.holdsRange("j", 1, 3), false, "not before the ack");
  assert.ok(part.ack("j", push.seq));
  assert.equal(part.ackOf("j"), 0);
  assert.deepEqual(
    [[1, 2], [2, 3], [1, 3], [0, 1], [0, 3]].map(([f, t]) => part.holdsRange("j", f!, t!)),
    [true, true, true, false, false],
    "deltas 1 and 2 are held, delta 0 is not",
  );
  assert.equal(part.holdsRange("k", 2, 3), false, "another neighbour holds nothing");
});

test("holdsRange: a write's interval is held only when every delta in it is, not when a later push's range covers its end", () => {
  // Write W buffered delta 1; before its interval was read another write buffered delta 2. A push
  // carrying delta 1 is in flight while a later push carrying only delta 2 is acknowledged.
  const part = new Alg2Partition(ops, 0, 0);
  part.append(new Set([0]), "self");
  const first = part.plan("j", false);
  assert.ok(part.ack("j", first.kind === "delta" ? first.seq : -1));
  part.append(new Set([1]), "self");
  const carriesW = part.planTail("j", false, 4); // in flight
  part.append(new Set([2]), "self");
  const later = part.planTail("j", false, 4);
  assert.ok(carriesW.kind === "delta" && later.kind === "delta" && [...later.payload].join() === "2");
  assert.ok(part.ack("j", later.seq));
  assert.equal(part.holdsRange("j", 1, 3), false, "W's delta 1 is not on j yet");
  assert.equal(part.holdsRange("j", 2, 3), true);
  assert.ok(part.ack("j", carriesW.seq));
  assert.equal(part.holdsRange("j", 1, 3), true);
  assert.equal(part.ackOf("j"), 3);
});

test("a repeated ack of a tail push sent after a lost one does not raise A(j) over the lost deltas", () => {
  const part = new Alg2Partition(ops, 0, 0);
  part.append(new Set([0]), "self");
  part.planTail("j", false, 4); // lost, unseen
  part.append(new Set([1]), "self");
  const push = part.planTail("j", false, 4);
  assert.ok(push.kind === "delta" && [...push.payload].join() === "1");
  for (let i = 0; i < 3; i++) assert.ok(part.ack("j", push.seq));
  assert.equal(part.ackOf("j"), 0, "j lacks delta 0");
  assert.equal(part.holdsRange("j", 0, 1), false);
  assert.equal(part.holdsRange("j", 1, 2), true);
});

test("planRange: a neighbour waiting for a full state gets a write's interval alone, acknowledged as a range", () => {
  const part = new Alg2Partition(ops, 0, 0);
  for (let i = 0; i < 6; i++) part.append(new Set([i]), "self");
  // The budget dropped deltas 0-3: j (ack 0) needs a full state for them.
  part.enforceLimit(2 * 8);
  assert.equal(part.bufferEntries[0]!.seq, 4);
  assert.equal(part.planTail("j", true, 4).kind, "state", "a tail push to j is its full state");
  assert.equal(part.planRange("j", 3, 5, true, 4).kind, "none", "delta 3 is no longer buffered");
  const range = part.planRange("j", 5, 6, true, 4);
  assert.ok(range.kind === "delta" && [...range.payload].join() === "5", "the write's delta 5 alone");
  assert.equal(part.planRange("j", 5, 6, true, 4).kind, "none", "not again while in flight");
  assert.ok(part.ack("j", range.seq));
  assert.equal(part.ackOf("j"), 0, "the range promises nothing below it");
  assert.deepEqual([part.holdsRange("j", 5, 6), part.holdsRange("j", 4, 6)], [true, false]);
  assert.equal(part.planRange("j", 5, 6, true, 4).kind, "none", "held already");
  // The full state's ack takes A(j) past it; a neighbour that needs no full state gets tails, not ranges.
  const state = part.plan("j", true);
  assert.equal(state.kind, "state");
  assert.ok(part.ack("j", state.seq));
  assert.equal(part.ackOf("j"), 6);
  part.append(new Set([6]), "self");
  assert.equal(part.planRange("j", 6, 7, true, 4).kind, "none");
  assert.equal(part.planTail("j", true, 4).kind, "delta");
});

test("planRange: a lost range push leaves S(j) alone, so ordinary pushes still carry its deltas", () => {
  const part = new Alg2Partition(ops, 0, 0);
  for (let i = 0; i < 4; i++) part.append(new Set([i]), "self");
  part.enforceLimit(2 * 8); // buffered: 2, 3
  const range = part.planRange("j", 3, 4, true, 4);
  assert.equal(range.kind, "delta");
  part.tailNotSent("j", range.kind === "delta" ? range.seq : -1);
  assert.equal(part.sentTo("j"), 0);
  const again = part.planRange("j", 3, 4, true, 4);
  assert.ok(again.kind === "delta" && again.seq !== (range.kind === "delta" ? range.seq : -1), "sent again, under a new label");
});
