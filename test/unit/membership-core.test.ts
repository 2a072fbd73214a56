// The SWIM core, deterministically: single-step checks on one core, and small clusters in the
// simulator (no loss unless stated) for failure detection, indirect probes, refutation, leave,
// reaping, rejoin, join via a seed and refusal of another cluster.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import {
  DEFAULT_MEMBERSHIP_CONFIG,
  deathBoundMs,
  resolveConfig,
  suspicionTimeoutMs,
} from "../../services/membership/config.ts";
import { MembershipCore } from "../../services/membership/core.ts";
import { seededRandom } from "../../services/common/prng.ts";
import { SimulationObserver } from "../../services/membership/sim-observer.ts";
import { MembershipSimulation } from "../../services/membership/simulator.ts";
import {
  MemberState,
  isLive,
  type MemberInfo,
  type MembershipChange,
} from "../../services/membership/types.ts";

const CLUSTER = "test";

function core(nodeId: string, port: number, options: { incarnation?: bigint; seed?: number; config?: object } = {}) {
  return new MembershipCore({
    cluster: CLUSTER,
    self: { nodeId, address: `127.0.0.1:${port}` },
    incarnation: options.incarnation,
    config: options.config,
    random: seededRandom(options.seed ?? port),
    now: 0,
  });
}

function info(nodeId: string, port: number, state: MemberState, incarnation = 0n): MemberInfo {
  return { nodeId, address: `127.0.0.1:${port}`, state, incarnation, sinceUnixMs: 0n };
}

/** A cluster of n nodes in the simulator, formed and agreed. */
function cluster(n: number, options: { seed?: number; lossRate?: number; config?: object } = {}) {
  const sim = new MembershipSimulation({ seed: options.seed ?? 1, lossRate: options.lossRate ?? 0, config: options.config });
  const events: { observer: string; change: MembershipChange; at: number }[] = [];
  sim.onChange((observer, change, at) => events.push({ observer, change, at }));
  const observer = new SimulationObserver(sim);
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    ids.push(sim.addNode());
    sim.run(100);
  }
  const agreed = sim.runUntilAgreement(sim.now + 30_000);
  assert.ok(agreed !== undefined, "the cluster forms");
  return { sim, ids, events, observer };
}

function stateOf(sim: MembershipSimulation, observer: string, subject: string): MemberState | undefined {
  return sim.core(observer).member(subject)?.state;
}

describe("membership core: single steps", () => {
  it("answers a ping with an ack and piggybacked updates, and merges the updates it carries", () => {
    const a = core("a", 1001);
    const answer = a.handlePing({ cluster: CLUSTER, from: "b", seq: 7n, target: "a", updates: [info("b", 1002, MemberState.ALIVE)] }, 10);
    assert.ok(answer.ok);
    assert.equal(answer.reply.ack, true);
    assert.equal(answer.reply.seq, 7n);
    assert.equal(answer.reply.from, "a");
    assert.equal(a.member("b")?.state, MemberState.ALIVE);
    const events = a.drain().events;
    assert.deepEqual(events.map((e) => [e.kind, e.member.nodeId, e.previous]), [["alive", "b", MemberState.MEMBER_STATE_UNSPECIFIED]]);
    assert.ok(a.joined, "being probed means being in a cluster");
  });

  it("does not ack a probe meant for another node id", () => {
    const a = core("a", 1001);
    const answer = a.handlePing({ cluster: CLUSTER, from: "b", seq: 1n, target: "old-a", updates: [] }, 0);
    assert.ok(answer.ok);
    assert.equal(answer.reply.ack, false);
  });

  it("refutes a suspicion by raising its incarnation and sending ALIVE back", () => {
    const a = core("a", 1001, { incarnation: 3n });
    const b = core("b", 1002);
    b.handlePing({ cluster: CLUSTER, from: "a", seq: 1n, target: "b", updates: [info("a", 1001, MemberState.ALIVE, 3n)] }, 0);
    // b suspects a at incarnation 3 and tells a.
    const answer = a.handlePing({ cluster: CLUSTER, from: "b", seq: 2n, target: "a", updates: [info("a", 1001, MemberState.SUSPECT, 3n)] }, 5);
    assert.ok(answer.ok);
    assert.equal(a.incarnation, 4n);
    const refutation = answer.reply.updates.find((u) => u.nodeId === "a");
    assert.ok(refutation, "the reply carries the refutation");
    assert.equal(refutation.state, MemberState.ALIVE);
    assert.equal(refutation.incarnation, 4n);
    // b held a SUSPECT(3); the ALIVE(4) overrides it.
    b.handlePing({ cluster: CLUSTER, from: "c", seq: 1n, target: "b", updates: [info("a", 1001, MemberState.SUSPECT, 3n)] }, 6);
    assert.equal(b.member("a")?.state, MemberState.SUSPECT);
    b.handlePing({ cluster: CLUSTER, from: "c", seq: 2n, target: "b", updates: [refutation] }, 7);
    assert.equal(b.member("a")?.state, MemberState.ALIVE);
    assert.equal(b.member("a")?.incarnation, 4n);
    const kinds = b.drain().events.map((e) => `${e.kind}:${e.previous}`);
    assert.deepEqual(kinds, ["alive:0", "suspect:1", "alive:2"]);
    assert.equal(a.stats().refutations, 1);
  });

  it("a second newer ALIVE claim of its id from another address is another live process under that id", () => {
    const heard: string[] = [];
    const a = new MembershipCore({ cluster: CLUSTER, self: { nodeId: "a", address: "127.0.0.1:1001" }, incarnation: 10n, random: seededRandom(1), now: 0, onIdentityConflict: (addr) => heard.push(addr) });
    // A record of a's id at its old address from before a restart, once: refuted, no conflict.
    a.handlePing({ cluster: CLUSTER, from: "b", seq: 1n, target: "a", updates: [info("a", 1009, MemberState.ALIVE, 20n)] }, 1);
    assert.equal(a.incarnation, 21n);
    assert.deepEqual(heard, []);
    // Older or equal records from there, or newer ones about a at its own address, are no contest.
    a.handlePing({ cluster: CLUSTER, from: "b", seq: 2n, target: "a", updates: [info("a", 1009, MemberState.ALIVE, 21n)] }, 2);
    a.handlePing({ cluster: CLUSTER, from: "b", seq: 3n, target: "a", updates: [info("a", 1001, MemberState.SUSPECT, 30n)] }, 3);
    assert.deepEqual(heard, []);
    // The process at 1009 refuted back: it is alive.
    a.handlePing({ cluster: CLUSTER, from: "b", seq: 4n, target: "a", updates: [info("a", 1009, MemberState.ALIVE, 40n)] }, 4);
    assert.deepEqual(heard, ["127.0.0.1:1009"]);
    assert.equal(a.stats().identityContests, 1);
    assert.equal(a.incarnation, 41n, "it still refutes: its own record stays its own");
  });

  it("probe path: direct ping, one more ping on timeout, SUSPECT, then a notice that lets it refute", () => {
    const a = core("a", 1001, { config: { indirectChecks: 3 } });
    const b = core("b", 1002);
    a.handlePing({ cluster: CLUSTER, from: "b", seq: 1n, target: "a", updates: [b.selfInfo()] }, 0);
    a.drain();
    a.tick(a.nextDeadline());
    const direct = a.drain().calls;
    assert.equal(direct.length, 1);
    assert.equal(direct[0]!.kind, "ping");
    const t0 = a.nextDeadline();
    a.tick(t0); // the direct ping times out; with no helper, only the second ping goes out
    const retry = a.drain().calls;
    assert.deepEqual(retry.map((c) => c.kind), ["ping"]);
    a.callFailed(retry[0]!.id, t0 + 1); // an error counts as a timeout
    assert.equal(a.member("b")?.state, MemberState.SUSPECT);
    const out = a.drain();
    assert.deepEqual(out.events.map((e) => e.kind), ["suspect"]);
    const notice = out.calls.find((c) => c.kind === "ping");
    assert.ok(notice && notice.kind === "ping" && notice.nodeId === "b");
    assert.ok(notice.request.updates.some((u) => u.nodeId === "b" && u.state === MemberState.SUSPECT), "the notice tells b");
    const answer = b.handlePing(notice.request, t0 + 5);
    assert.ok(answer.ok);
    a.receivePingReply(notice.id, answer.reply, t0 + 10);
    assert.equal(a.member("b")?.state, MemberState.ALIVE);
    assert.equal(a.member("b")?.incarnation, 1n);
    a.tick(t0 + 60_000);
    assert.equal(a.member("b")?.state, MemberState.ALIVE, "no death after the refutation");
  });

  it("never lets an old ALIVE undo a death, but a higher incarnation does", () => {
    const a = core("a", 1001);
    const ping = (updates: MemberInfo[], at: number) => a.handlePing({ cluster: CLUSTER, from: "x", seq: 1n, target: "a", updates }, at);
    ping([info("b", 1002, MemberState.ALIVE, 2n)], 0);
    ping([info("b", 1002, MemberState.DEAD, 2n)], 1);
    ping([info("b", 1002, MemberState.ALIVE, 2n)], 2);
    assert.equal(a.member("b")?.state, MemberState.DEAD);
    ping([info("b", 1002, MemberState.ALIVE, 3n)], 3);
    assert.equal(a.member("b")?.state, MemberState.ALIVE);
    assert.equal(a.member("b")?.incarnation, 3n);
  });

  it("corrects a sender that repeats an outdated record", () => {
    const a = core("a", 1001);
    a.handlePing({ cluster: CLUSTER, from: "x", seq: 1n, target: "a", updates: [info("b", 1002, MemberState.ALIVE, 5n)] }, 0);
    a.drain();
    // Drain the retransmit budget so that only the correction can carry b's record.
    for (let i = 0; i < 40; i++) a.handlePing({ cluster: CLUSTER, from: "y", seq: 1n, target: "a", updates: [] }, 1);
    const answer = a.handlePing({ cluster: CLUSTER, from: "z", seq: 2n, target: "a", updates: [info("b", 1002, MemberState.SUSPECT, 4n)] }, 2);
    assert.ok(answer.ok);
    const b = answer.reply.updates.find((u) => u.nodeId === "b");
    assert.equal(b?.state, MemberState.ALIVE);
    assert.equal(b?.incarnation, 5n);
  });

  it("relays a PingReq: pings the target and answers later, ack or nack", () => {
    const helper = core("h", 1003);
    const answer = helper.handlePingReq({
      cluster: CLUSTER, from: "a", seq: 9n, target: "b", targetAddress: "127.0.0.1:1002", timeoutMs: 300, updates: [],
    }, 0);
    assert.ok(answer.ok && answer.pending !== undefined);
    const call = helper.drain().calls.find((c) => c.kind === "ping");
    assert.ok(call && call.kind === "ping");
    assert.equal(call.address, "127.0.0.1:1002");
    assert.equal(call.timeoutMs, 300);
    helper.receivePingReply(call.id, { from: "b", seq: call.request.seq, ack: true, updates: [] }, 10);
    const replies = helper.drain().replies;
    assert.equal(replies.length, 1);
    assert.equal(replies[0]!.requestId, answer.pending);
    assert.equal(replies[0]!.reply.ack, true);
    assert.equal(replies[0]!.reply.seq, 9n);

    const second = helper.handlePingReq({
      cluster: CLUSTER, from: "a", seq: 10n, target: "b", targetAddress: "127.0.0.1:1002", timeoutMs: 300, updates: [],
    }, 20);
    assert.ok(second.ok && second.pending !== undefined);
    helper.drain();
    helper.tick(20 + 300);
    const nack = helper.drain().replies;
    assert.equal(nack.length, 1);
    assert.equal(nack[0]!.reply.ack, false);
  });

  it("refuses another cluster, malformed messages and its own id, without changing the view", () => {
    const a = core("a", 1001);
    const other = a.handleJoin({ cluster: "other", self: info("b", 1002, MemberState.ALIVE) }, 0);
    assert.ok(!other.ok);
    assert.equal(other.refusal.code, "FAILED_PRECONDITION");
    // Refused as a setting that differs, naming both names (the joiner then stops or keeps trying).
    assert.equal(other.refusal.setting, "cluster");
    assert.equal(other.refusal.inCluster, false);
    assert.equal(other.refusal.message,
      `--cluster differs: joining node "b" (127.0.0.1:1002) runs with --cluster "other" but node "a" with --cluster ${JSON.stringify(CLUSTER)}; every node of a cluster needs the same --cluster`);
    const ping = a.handlePing({ cluster: "other", from: "b", seq: 1n, target: "a", updates: [] }, 0);
    assert.ok(!ping.ok);
    assert.equal(ping.refusal.setting, "cluster");
    const cases: [string, () => { ok: boolean; refusal?: { code: string } }][] = [
      ["empty cluster", () => a.handlePing({ cluster: "", from: "b", seq: 1n, target: "a", updates: [] }, 0)],
      ["empty from", () => a.handlePing({ cluster: CLUSTER, from: "", seq: 1n, target: "a", updates: [] }, 0)],
      ["bad address", () => a.handlePing({ cluster: CLUSTER, from: "b", seq: 1n, target: "a", updates: [{ ...info("b", 1002, MemberState.ALIVE), address: "no port" }] }, 0)],
      ["bad state", () => a.handlePing({ cluster: CLUSTER, from: "b", seq: 1n, target: "a", updates: [{ ...info("b", 1002, MemberState.ALIVE), state: 42 as MemberState }] }, 0)],
      ["control chars", () => a.handlePing({ cluster: CLUSTER, from: "b\u0000", seq: 1n, target: "a", updates: [] }, 0)],
      ["join without self", () => a.handleJoin({ cluster: CLUSTER }, 0)],
      ["join not alive", () => a.handleJoin({ cluster: CLUSTER, self: info("b", 1002, MemberState.DEAD) }, 0)],
      ["pingreq bad target address", () => a.handlePingReq({ cluster: CLUSTER, from: "b", seq: 1n, target: "c", targetAddress: "c", timeoutMs: 1, updates: [] }, 0)],
      ["leave without id", () => a.handleLeave({ cluster: CLUSTER, nodeId: "", incarnation: 0n }, 0)],
      ["too many updates", () => a.handlePing({ cluster: CLUSTER, from: "b", seq: 1n, target: "a", updates: Array.from({ length: DEFAULT_MEMBERSHIP_CONFIG.maxUpdatesPerMessage + 1 }, (_, i) => info(`n${i}`, 2000, MemberState.ALIVE)) }, 0)],
    ];
    for (const [name, call] of cases) {
      const answer = call();
      assert.equal(answer.ok, false, name);
      assert.equal(answer.refusal?.code, "INVALID_ARGUMENT", name);
    }
    const self = a.handleJoin({ cluster: CLUSTER, self: info("a", 1009, MemberState.ALIVE) }, 0);
    assert.ok(!self.ok);
    assert.equal(self.refusal.code, "FAILED_PRECONDITION");
    assert.deepEqual(a.members().map((m) => m.nodeId), ["a"]);
    assert.equal(a.drain().events.length, 0);
    assert.equal(a.stats().refusedRequests, cases.length + 3);
  });

  it("refuses a Join, Ping or PingReq whose partitions or replication factor differ; absent fields are not checked", () => {
    const settings = { partitions: 64, replicationFactor: 3 };
    const a = new MembershipCore({ cluster: CLUSTER, self: { nodeId: "a", address: "127.0.0.1:1001" }, settings, random: seededRandom(1), now: 0 });
    const refused: [string, ReturnType<typeof a.handleJoin> | ReturnType<typeof a.handlePingReq>, string, RegExp][] = [
      ["join partitions", a.handleJoin({ cluster: CLUSTER, self: info("b", 1002, MemberState.ALIVE), partitions: 32, replicationFactor: 3 }, 0), "partitions",
        /^--partitions differs: joining node "b" \(127\.0\.0\.1:1002\) runs with --partitions 32 but node "a" with --partitions 64; every node of a cluster needs the same --partitions$/],
      ["join all", a.handleJoin({ cluster: CLUSTER, self: info("b", 1002, MemberState.ALIVE), partitions: 64, replicationFactor: 0 }, 0), "replication-factor",
        /--replication-factor all but node "a" with --replication-factor 3/],
      ["ping", a.handlePing({ cluster: CLUSTER, from: "b", seq: 1n, target: "a", updates: [], replicationFactor: 2 }, 0), "replication-factor",
        /node "b" runs with --replication-factor 2 but node "a" with --replication-factor 3/],
      ["pingreq", a.handlePingReq({ cluster: CLUSTER, from: "b", seq: 1n, target: "c", targetAddress: "127.0.0.1:1003", timeoutMs: 1, updates: [], partitions: 16 }, 0), "partitions",
        /--partitions 16 but node "a" with --partitions 64/],
    ];
    for (const [name, answer, setting, message] of refused) {
      assert.ok(!answer.ok, name);
      assert.equal(answer.refusal.code, "FAILED_PRECONDITION", name);
      assert.equal(answer.refusal.setting, setting, name);
      assert.match(answer.refusal.message, message, name);
      // a is in no cluster yet: a joiner is told so, and keeps trying instead of giving up.
      if (name.startsWith("join")) assert.equal(answer.refusal.inCluster, false, name);
    }
    // Refused before anything of the caller was taken: the view is a's alone, and a is in no cluster.
    assert.deepEqual(a.members().map((m) => m.nodeId), ["a"]);
    assert.equal(a.joined, false);
    // An earlier version sends neither field: admitted. Matching values: admitted.
    assert.ok(a.handleJoin({ cluster: CLUSTER, self: info("b", 1002, MemberState.ALIVE) }, 0).ok);
    assert.ok(a.handleJoin({ cluster: CLUSTER, self: info("c", 1003, MemberState.ALIVE), ...settings }, 0).ok);
    assert.ok(a.handlePing({ cluster: CLUSTER, from: "b", seq: 2n, target: "a", updates: [], ...settings }, 0).ok);
    assert.deepEqual(a.members().map((m) => m.nodeId), ["a", "b", "c"]);
    // Now a member of a cluster, a refuses as one.
    const asMember = a.handleJoin({ cluster: CLUSTER, self: info("d", 1004, MemberState.ALIVE), partitions: 8 }, 0);
    assert.ok(!asMember.ok && asMember.refusal.inCluster === true && /but member "a" with --partitions 64/.test(asMember.refusal.message));
    // What a sends carries its settings: joins, probes and indirect probes.
    a.drain();
    a.join(["127.0.0.1:1009"], 0);
    const join = a.drain().calls.find((c) => c.kind === "join")!;
    assert.equal(join.kind === "join" && join.request.partitions, 64);
    assert.equal(join.kind === "join" && join.request.replicationFactor, 3);
    a.tick(a.nextDeadline());
    const ping = a.drain().calls.find((c) => c.kind === "ping")!;
    assert.ok(ping.kind === "ping" && ping.request.partitions === 64 && ping.request.replicationFactor === 3);
    // A core without settings sends none (and checks none).
    const plain = core("p", 1010);
    plain.join(["127.0.0.1:1001"], 0);
    const plainJoin = plain.drain().calls[0]!;
    assert.ok(plainJoin.kind === "join" && plainJoin.request.partitions === undefined && plainJoin.request.replicationFactor === undefined);
    assert.ok(plain.handlePing({ cluster: CLUSTER, from: "b", seq: 1n, target: "p", updates: [], partitions: 7, replicationFactor: 9 }, 0).ok);
  });

  it("treats an invalid reply as a failed call", () => {
    const a = core("a", 1001);
    a.join(["127.0.0.1:1002"], 0);
    const call = a.drain().calls[0]!;
    assert.equal(call.kind, "join");
    a.receiveJoinReply(call.id, { from: "b", members: [{ ...info("b", 1002, MemberState.ALIVE), address: "" }] }, 1);
    assert.equal(a.joined, false);
    assert.equal(a.isPending(call.id), false);
    assert.equal(a.stats().invalidReplies, 1);
  });

  it("rejects settings that cannot work", () => {
    assert.throws(() => resolveConfig({ probeIntervalMs: 0 }), RangeError);
    assert.throws(() => resolveConfig({ indirectChecks: -1 }), RangeError);
    assert.throws(() => resolveConfig({ bogus: 1 } as object), RangeError);
    assert.throws(() => core("a", 0), RangeError, "port 0 is no address to dial");
  });
});

describe("membership core: small clusters", () => {
  it("detects a silent node: SUSPECT, then DEAD at every member within the bound", () => {
    const { sim, ids, events, observer } = cluster(5);
    const victim = ids[2]!;
    const crashedAt = sim.now;
    sim.crash(victim);
    const others = ids.filter((id) => id !== victim);
    // Worst case for the first death, plus time for the other members' own timers and the gossip.
    const bound = deathBoundMs(resolveConfig(), 5) + 2000;
    const done = sim.runUntil(crashedAt + bound, () => others.every((id) => stateOf(sim, id, victim) === MemberState.DEAD));
    assert.ok(done, `all members mark ${victim} DEAD within ${bound} ms`);
    const about = events.filter((e) => e.change.member.nodeId === victim && e.at >= crashedAt);
    const firstSuspect = about.find((e) => e.change.kind === "suspect");
    const firstDead = about.find((e) => e.change.kind === "dead");
    assert.ok(firstSuspect && firstDead && firstSuspect.at < firstDead.at, "suspected before declared dead");
    assert.ok(firstDead.at - firstSuspect.at >= suspicionTimeoutMs(resolveConfig(), 5) - 1, "the suspicion timeout is respected");
    assert.equal(observer.falseAccusations.length, 0);
  });

  it("an indirect probe saves a node whose direct link is cut", () => {
    const run = (indirectChecks: number) => {
      const { sim, ids, observer } = cluster(5, { config: { indirectChecks } });
      const [a, b] = [ids[0]!, ids[1]!];
      sim.setLink(a, b, false);
      sim.run(60_000);
      return { observer, a, b, stats: sim.core(a).stats() };
    };
    const withHelp = run(3);
    assert.equal(withHelp.observer.falseAccusations.length, 0, "nobody suspects a or b");
    assert.ok(withHelp.stats.indirectProbes > 0, "a probed b through others");
    // Without indirect probes the same cut makes a suspect b: the helpers are what saved it.
    const alone = run(0);
    assert.ok(alone.observer.falseAccusations.some((x) => x.kind === "suspect"), "without helpers the cut causes suspicions");
  });

  it("a suspected node that hears of it refutes before the timeout, and is not declared dead", () => {
    const { sim, ids, observer } = cluster(5);
    const victim = ids[3]!;
    const before = sim.core(victim).incarnation;
    for (const id of ids) if (id !== victim) sim.setLink(victim, id, false);
    const suspected = sim.runUntil(sim.now + 20_000, () => observer.falseAccusations.some((x) => x.kind === "suspect" && x.nodeId === victim));
    assert.ok(suspected, "the cut node is suspected");
    for (const id of ids) if (id !== victim) sim.setLink(victim, id, true);
    sim.run(20_000);
    assert.equal(observer.count("dead"), 0, "refuted in time");
    assert.ok(sim.core(victim).incarnation > before, "the refutation raised the incarnation");
    for (const id of ids) {
      assert.equal(stateOf(sim, id, victim) ?? MemberState.ALIVE, MemberState.ALIVE);
      assert.equal(sim.core(id).member(victim)?.incarnation, sim.core(victim).incarnation);
    }
  });

  it("a graceful leave spreads as LEFT at once, then the member is reaped", () => {
    const reapAfterMs = 5000;
    const { sim, ids, events } = cluster(8, { config: { reapAfterMs } });
    const leaver = ids[5]!;
    const at = sim.now;
    sim.leave(leaver);
    const others = ids.filter((id) => id !== leaver);
    const spread = sim.runUntil(at + 3000, () => others.every((id) => stateOf(sim, id, leaver) === MemberState.LEFT));
    assert.ok(spread, "every member sees LEFT within 3 s");
    assert.ok(!events.some((e) => e.change.member.nodeId === leaver && (e.change.kind === "dead" || e.change.kind === "suspect")));
    assert.ok(sim.core(others[0]!).members().every((m) => m.nodeId !== leaver), "a departed member is not in the default view");
    assert.ok(sim.core(others[0]!).members({ includeDeparted: true }).some((m) => m.nodeId === leaver));
    sim.run(reapAfterMs + 1000);
    for (const id of others) {
      assert.equal(sim.core(id).member(leaver), undefined, `${id} reaped ${leaver}`);
    }
    const reaped = events.filter((e) => e.change.kind === "reaped" && e.change.member.nodeId === leaver);
    assert.equal(reaped.length, others.length, "one reaped event per member");
    assert.ok(reaped.every((e) => e.change.previous === MemberState.LEFT));
  });

  it("a restarted node rejoins under its id with a higher incarnation, even with nothing persisted", () => {
    const { sim, ids, events } = cluster(5);
    const node = ids[1]!;
    // Raise its incarnation first, so that a restart at 0 really is below what the cluster knows.
    sim.core(node).handlePing({ cluster: "sim", from: "x", seq: 1n, target: node, updates: [{ ...sim.core(node).selfInfo(), state: MemberState.SUSPECT }] }, sim.now);
    sim.run(5000);
    const old = sim.core(node).incarnation;
    assert.ok(old > 0n);
    sim.crash(node);
    const others = ids.filter((id) => id !== node);
    assert.ok(sim.runUntil(sim.now + 20_000, () => others.every((id) => stateOf(sim, id, node) === MemberState.DEAD)));
    const restartAt = sim.now;
    sim.restart(node, { incarnation: "fresh" });
    const back = sim.runUntil(sim.now + 10_000, () => others.every((id) => stateOf(sim, id, node) === MemberState.ALIVE));
    assert.ok(back, "ALIVE again everywhere");
    assert.ok(sim.core(node).incarnation > old, "started at 0, raised above the old incarnation on join");
    for (const id of others) assert.equal(sim.core(id).member(node)?.incarnation, sim.core(node).incarnation);
    const revived = events.filter((e) => e.at >= restartAt && e.change.member.nodeId === node && e.change.kind === "alive");
    assert.ok(revived.length >= others.length && revived.every((e) => e.change.previous === MemberState.DEAD));

    // A restart quicker than detection (persisted incarnation + 1) replaces the old process in place.
    sim.crash(node);
    sim.run(200);
    sim.restart(node);
    sim.run(15_000);
    for (const id of others) {
      assert.equal(stateOf(sim, id, node), MemberState.ALIVE);
      assert.equal(sim.core(id).member(node)?.incarnation, sim.core(node).incarnation);
    }
  });

  it("joins through one seed and learns the whole cluster; the others learn the joiner", () => {
    const { sim, ids } = cluster(6);
    const seed = sim.node(ids[4]!).address;
    const joiner = sim.addNode({ seeds: [seed] });
    sim.run(10);
    const ok = sim.runUntil(sim.now + 10_000, () => sim.viewsAgree());
    assert.ok(ok, "all views agree after the join");
    assert.deepEqual(sim.core(joiner).members().map((m) => m.nodeId).sort(), [...ids, joiner].sort());
    assert.equal(sim.traffic.joins > 0, true);
  });

  it("a seed answers Join with the full member list, joiner included", () => {
    const { sim, ids } = cluster(4);
    const answer = sim.core(ids[0]!).handleJoin({ cluster: "sim", self: info("new", 4242, MemberState.ALIVE) }, sim.now);
    assert.ok(answer.ok);
    assert.deepEqual(answer.reply.members.map((m) => m.nodeId).sort(), [...ids, "new"].sort());
    assert.ok(answer.reply.members.every((m) => isLive(m.state)));
    const refused = sim.core(ids[0]!).handleJoin({ cluster: "elsewhere", self: info("new2", 4243, MemberState.ALIVE) }, sim.now);
    assert.ok(!refused.ok && refused.refusal.code === "FAILED_PRECONDITION");
    assert.equal(sim.core(ids[0]!).member("new2"), undefined);
  });

  it("is deterministic: the same seed gives the same history", () => {
    const history = (seed: number) => {
      const { sim, ids, events } = cluster(6, { seed, lossRate: 0.2 });
      sim.crash(ids[2]!);
      sim.leave(ids[4]!);
      sim.run(20_000);
      return events.map((e) => `${e.at.toFixed(3)} ${e.observer} ${e.change.kind} ${e.change.member.nodeId}@${e.change.member.incarnation}`);
    };
    const first = history(11);
    assert.deepEqual(history(11), first);
    assert.notDeepEqual(history(12), first);
  });
});
