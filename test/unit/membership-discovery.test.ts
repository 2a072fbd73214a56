// Seed discovery: a static list, a DNS name resolved through an injected resolver, the backoff
// formula, and the join loop (retries until joined, rejoins when alone, stops on demand).
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import {
  SeedJoiner,
  backoffDelay,
  dnsSeeds,
  formatAddress,
  staticSeeds,
  type ResolvedAddress,
} from "../../services/membership/discovery.ts";

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("seed providers", () => {
  it("a static list is validated and de-duplicated", async () => {
    assert.deepEqual(await staticSeeds(["10.0.0.1:7000", "10.0.0.1:7000", "seed.example:7000"])(), ["10.0.0.1:7000", "seed.example:7000"]);
    assert.throws(() => staticSeeds(["10.0.0.1"]), RangeError);
  });

  it("a DNS name is resolved with the port added, cached for refreshMs, and the last answer kept on failure", async () => {
    let clock = 0;
    let answer: ResolvedAddress[] | Error = [
      { address: "10.0.0.2", family: 4 }, { address: "10.0.0.1", family: 4 }, { address: "fd00::1", family: 6 }, { address: "10.0.0.1", family: 4 },
    ];
    const asked: string[] = [];
    const seeds = dnsSeeds({
      name: "deltaset-headless.default.svc.cluster.local", port: 7000, refreshMs: 1000, now: () => clock,
      resolve: async (name) => {
        asked.push(name);
        if (answer instanceof Error) throw answer;
        return answer;
      },
    });
    assert.deepEqual(await seeds(), ["10.0.0.1:7000", "10.0.0.2:7000", "[fd00::1]:7000"]);
    answer = [{ address: "10.0.0.3", family: 4 }];
    clock = 500;
    assert.deepEqual(await seeds(), ["10.0.0.1:7000", "10.0.0.2:7000", "[fd00::1]:7000"], "cached");
    clock = 1000;
    assert.deepEqual(await seeds(), ["10.0.0.3:7000"], "refreshed");
    answer = new Error("ENOTFOUND");
    clock = 5000;
    assert.deepEqual(await seeds(), ["10.0.0.3:7000"], "last good answer");
    assert.equal(asked.length, 3);
    const never = dnsSeeds({ name: "x", port: 1, resolve: async () => { throw new Error("ENOTFOUND"); } });
    await assert.rejects(never(), /ENOTFOUND/);
    assert.throws(() => dnsSeeds({ name: "x", port: 0 }), RangeError);
    assert.equal(formatAddress("::1", 80), "[::1]:80");
  });
});

describe("backoff", () => {
  it("grows exponentially, is capped, and jitters within bounds", () => {
    const options = { initialMs: 100, maxMs: 1000, multiplier: 2, jitter: 0 };
    assert.deepEqual([0, 1, 2, 3, 4, 10].map((a) => backoffDelay(a, options, () => 0.5)), [100, 200, 400, 800, 1000, 1000]);
    const jittered = { ...options, jitter: 0.5 };
    assert.equal(backoffDelay(0, jittered, () => 0), 50);
    assert.equal(backoffDelay(0, jittered, () => 0.999999), 150);
  });
});

describe("join loop", () => {
  function harness() {
    const sleeps: { ms: number; wake: () => void }[] = [];
    const attempts: string[][] = [];
    const state = { joined: false, alone: false, results: [] as boolean[], seedFailures: 1 };
    const joiner = new SeedJoiner({
      self: "10.0.0.9:7000",
      seeds: async () => {
        if (state.seedFailures-- > 0) throw new Error("lookup failed");
        return ["10.0.0.1:7000", "10.0.0.9:7000", "10.0.0.2:7000"];
      },
      attempt: async (addresses) => {
        attempts.push(addresses);
        const ok = state.results.shift() ?? false;
        if (ok) {
          state.joined = true;
          state.alone = false;
        }
        return ok;
      },
      needsJoin: () => !state.joined || state.alone,
      sleep: (ms, signal) => new Promise<void>((resolve) => {
        sleeps.push({ ms, wake: resolve });
        signal.addEventListener("abort", () => resolve(), { once: true });
      }),
      backoff: { initialMs: 100, maxMs: 400, multiplier: 2, jitter: 0 },
      recheckMs: 5000,
    });
    const wake = async () => {
      await flush();
      const next = sleeps.shift();
      assert.ok(next, "the loop is sleeping");
      next.wake();
      await flush();
      return next.ms;
    };
    return { joiner, sleeps, attempts, state, wake };
  }

  it("backs off on lookup errors and failed joins, stops retrying once joined, and rejoins when alone", async () => {
    const { joiner, attempts, state, wake } = harness();
    state.results = [false, false, true];
    joiner.start();
    assert.equal(await wake(), 100, "after the failed lookup");
    assert.equal(await wake(), 200, "after the first failed join");
    assert.equal(await wake(), 400, "after the second failed join");
    assert.equal(state.joined, true);
    assert.equal(await wake(), 5000, "joined: only a periodic check");
    assert.equal(await wake(), 5000);
    assert.equal(attempts.length, 3);
    assert.deepEqual(attempts[0]!.slice().sort(), ["10.0.0.1:7000", "10.0.0.2:7000"], "never joins through itself");
    // Everyone else is gone (say, all other nodes restarted): join again through the seeds.
    state.alone = true;
    state.results = [true];
    await wake();
    assert.equal(attempts.length, 4);
    assert.equal(await wake(), 5000, "back to periodic checks");
    await joiner.stop();
    assert.equal(joiner.attempts, 4);
  });

  it("says so when no seed answers: at the 3rd failed join in a row, then every 10th, and not once joined", async () => {
    const told: Array<{ failures: number; tried: string[] }> = [];
    let attempts = 0;
    let joinAt = 30;
    const joiner = new SeedJoiner({
      self: "10.0.0.9:7000",
      seeds: async () => ["10.0.0.1:7000"],
      attempt: async () => ++attempts >= joinAt,
      needsJoin: () => attempts < joinAt,
      sleep: () => new Promise<void>((resolve) => setImmediate(resolve)),
      onStillAlone: (failures, tried) => told.push({ failures, tried }),
    });
    joiner.start();
    while (attempts < joinAt) await flush();
    await joiner.stop();
    assert.deepEqual(told.map((t) => t.failures), [3, 13, 23]);
    assert.deepEqual(told[0]!.tried, ["10.0.0.1:7000"]);
    // A node whose only seed is itself (a single node) is never told it is alone.
    told.length = 0;
    attempts = 0;
    joinAt = Infinity;
    const single = new SeedJoiner({
      self: "10.0.0.9:7000",
      seeds: async () => ["10.0.0.9:7000"],
      attempt: async () => false,
      needsJoin: () => true,
      sleep: () => new Promise<void>((resolve) => setImmediate(resolve)),
      onStillAlone: (failures, tried) => told.push({ failures, tried }),
    });
    single.start();
    for (let i = 0; i < 50; i++) await flush();
    await single.stop();
    assert.deepEqual(told, []);
  });

  it("tries at most `fanout` random seeds per attempt", async () => {
    const attempts: string[][] = [];
    const seeds = Array.from({ length: 50 }, (_, i) => `10.0.1.${i + 1}:7000`);
    let joined = false;
    const joiner = new SeedJoiner({
      self: "10.0.0.9:7000", seeds: async () => seeds, fanout: 3,
      attempt: async (addresses) => {
        attempts.push(addresses);
        joined = attempts.length === 2;
        return joined;
      },
      needsJoin: () => !joined,
      sleep: () => new Promise<void>((resolve) => setImmediate(resolve)),
    });
    joiner.start();
    while (!joined) await flush();
    await joiner.stop();
    assert.equal(attempts.length, 2);
    for (const a of attempts) assert.ok(a.length === 3 && a.every((x) => seeds.includes(x)));
    assert.notDeepEqual(attempts[0], attempts[1], "another attempt tries other seeds");
  });

  it("stop() ends the loop while it sleeps", async () => {
    const { joiner, sleeps } = harness();
    joiner.start();
    await flush();
    assert.equal(sleeps.length, 1);
    await joiner.stop();
  });
});

describe("partition healing", () => {
  it("while joined, periodically joins through seeds that are not live members", async () => {
    const attempts: string[][] = [];
    let clock = 0;
    const live = new Set(["127.0.0.1:7000"]);
    const sleeps: Array<() => void> = [];
    const joiner = new SeedJoiner({
      self: "127.0.0.9:7000",
      seeds: async () => ["127.0.0.1:7000", "127.0.0.2:7000", "127.0.0.9:7000"],
      attempt: async (addresses) => {
        attempts.push(addresses);
        return true;
      },
      needsJoin: () => false,
      notLive: (seeds) => seeds.filter((a) => !live.has(a)),
      reconcileMs: 10_000,
      now: () => clock,
      recheckMs: 1000,
      sleep: (_ms, signal) => new Promise<void>((resolve) => {
        sleeps.push(resolve);
        signal.addEventListener("abort", () => resolve(), { once: true });
      }),
    });
    joiner.start();
    const step = async (advance: number) => {
      for (let i = 0; i < 5 && sleeps.length === 0; i++) await new Promise((r) => setImmediate(r));
      clock += advance;
      sleeps.shift()?.();
      for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    };
    await step(5000);
    assert.equal(attempts.length, 0, "no reconcile before reconcileMs");
    await step(6000);
    assert.deepEqual(attempts, [["127.0.0.2:7000"]], "joins through the seed that is not live, never itself");
    live.add("127.0.0.2:7000");
    await step(11_000);
    assert.equal(attempts.length, 1, "nothing to reconcile once every seed is live");
    await joiner.stop();
  });
});
