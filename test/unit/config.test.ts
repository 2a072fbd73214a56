// Node configuration: defaults < JSON file < environment < flags, and clear errors for bad values.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { parseArgs } from "node:util";
import { ConfigError, DEFAULT_CONFIG, configFlags, loadConfig, withBoolValues } from "../../services/node/config.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-config-"));
after(() => rmSync(dir, { recursive: true, force: true }));

function file(obj: unknown): string {
  const p = join(dir, `c${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(p, JSON.stringify(obj));
  return p;
}

describe("configuration", () => {
  it("defaults are safe: loopback, fsync, 64 partitions, advertise = listen", () => {
    const c = loadConfig({}, {});
    assert.equal(c.listen, "127.0.0.1:7070");
    assert.equal(c.advertise, "127.0.0.1:7070");
    assert.equal(c.sync, "fsync");
    assert.equal(c.partitions, 64);
    assert.deepEqual(c.limits, DEFAULT_CONFIG.limits);
  });

  it("file < environment < flags, setting by setting", () => {
    const f = file({ listen: "127.0.0.5:1000", partitions: 8, cluster: "from-file", limits: { maxKeyBytes: 100 }, gossip: { intervalMs: 50 } });
    const env = { DELTASET_PARTITIONS: "16", DELTASET_CLUSTER: "from-env", DELTASET_GOSSIP_BP: "false" };
    const c = loadConfig({ config: f, cluster: "from-flag" }, env);
    assert.equal(c.listen, "127.0.0.5:1000"); // file only
    assert.equal(c.partitions, 16); // env beats file
    assert.equal(c.cluster, "from-flag"); // flag beats env and file
    assert.equal(c.limits.maxKeyBytes, 100); // nested file setting
    assert.equal(c.limits.maxElementBytes, DEFAULT_CONFIG.limits.maxElementBytes); // untouched default
    assert.equal(c.gossip.intervalMs, 50);
    assert.equal(c.gossip.bp, false);
    assert.equal(loadConfig({}, { DELTASET_CONFIG: f }).partitions, 8); // file named by env
  });

  it("boolean flags: alone mean true, and take true/false however written, a false winning over the environment", () => {
    const flags = (args: string[]) => parseArgs({ args: withBoolValues(args), options: configFlags(), strict: true }).values as Record<string, string>;
    const env = { DELTASET_INSECURE_PEERS: "true", DELTASET_GOSSIP_BP: "false" };
    assert.equal(loadConfig(flags(["--insecure-peers"]), {}).insecurePeers, true);
    assert.equal(loadConfig(flags(["--insecure-peers", "false"]), env).insecurePeers, false);
    assert.equal(loadConfig(flags(["--insecure-peers=no"]), env).insecurePeers, false);
    // A boolean that used to need a value may be given alone, before another flag or last.
    const c = loadConfig(flags(["--gossip-bp", "--insecure-clients"]), env);
    assert.equal(c.gossip.bp, true);
    assert.equal(c.insecureClients, true);
    assert.throws(() => loadConfig(flags(["--insecure-peers=maybe"]), {}), (e: Error) => e instanceof ConfigError && /insecure-peers.*"maybe" is not a boolean/.test(e.message));
    // Past '--' nothing is a flag.
    assert.deepEqual(withBoolValues(["--", "--insecure-peers"]), ["--", "--insecure-peers"]);
  });

  it("storage sizes from flags, environment or file", () => {
    assert.deepEqual(loadConfig({}, {}).storage, { writeBufferBytes: 16 * 1024 * 1024, cacheBytes: 8 * 1024 * 1024, stateCacheBytes: 256 * 1024 * 1024, presenceFilterBytes: 64 * 1024 * 1024 });
    const c = loadConfig({ "store-write-buffer-bytes": "1048576", "state-cache-bytes": "131072", "presence-filter-bytes": "262144" }, { DELTASET_STORE_CACHE_BYTES: "33554432" });
    assert.deepEqual(c.storage, { writeBufferBytes: 1048576, cacheBytes: 33554432, stateCacheBytes: 131072, presenceFilterBytes: 262144 });
    assert.equal(loadConfig({}, { DELTASET_PRESENCE_FILTER_BYTES: "65536" }).storage.presenceFilterBytes, 65536);
    assert.throws(() => loadConfig({ "presence-filter-bytes": "0" }, {}), /storage\.presenceFilterBytes must be an integer of at least 65536/);
    assert.equal(loadConfig({ config: file({ storage: { cacheBytes: 65536 } }) }, {}).storage.cacheBytes, 65536);
    assert.equal(loadConfig({}, { DELTASET_STATE_CACHE_BYTES: "65536" }).storage.stateCacheBytes, 65536);
    assert.throws(() => loadConfig({ "state-cache-bytes": "1000" }, {}), /storage\.stateCacheBytes must be an integer of at least 65536/);
  });

  it("refused counter joins held: 16 MiB unless set, from flag, environment or file; a negative value names the flag", () => {
    assert.equal(loadConfig({}, {}).gossip.refusedJoinsBytes, 16 * 1024 * 1024);
    assert.equal(loadConfig({ "gossip-refused-joins-bytes": "0" }, {}).gossip.refusedJoinsBytes, 0);
    assert.equal(loadConfig({}, { DELTASET_GOSSIP_REFUSED_JOINS_BYTES: "4096" }).gossip.refusedJoinsBytes, 4096);
    assert.equal(loadConfig({ config: file({ gossip: { refusedJoinsBytes: 65536 } }) }, {}).gossip.refusedJoinsBytes, 65536);
    assert.throws(() => loadConfig({ "gossip-refused-joins-bytes": "-1" }, {}), (e: Error) => e instanceof ConfigError && /--gossip-refused-joins-bytes/.test(e.message));
  });

  it("peer reconnect backoff: 100 ms growing to 2 s unless set", () => {
    const d = loadConfig({}, {});
    assert.deepEqual([d.peerReconnectInitialMs, d.peerReconnectMaxMs], [100, 2000]);
    const c = loadConfig({ "peer-reconnect-max-ms": "5000" }, { DELTASET_PEER_RECONNECT_INITIAL_MS: "250" });
    assert.deepEqual([c.peerReconnectInitialMs, c.peerReconnectMaxMs], [250, 5000]);
  });

  it("lists from comma-separated values", () => {
    const c = loadConfig({ seeds: "127.0.0.2:7070, 127.0.0.3:7070," }, {});
    assert.deepEqual(c.seeds, ["127.0.0.2:7070", "127.0.0.3:7070"]);
  });

  it("checks a config file's values like flags: numbers, booleans and lists as such or as their text", () => {
    for (const [obj, pattern] of [
      [{ partitions: "abc" }, /partitions: "abc" is not a non-negative integer/],
      [{ partitions: 1.5 }, /partitions: 1\.5 is not a non-negative integer/],
      [{ gossip: { bp: "maybe" } }, /gossip\.bp: "maybe" is not a boolean/],
      [{ seeds: [1, 2] }, /seeds: \[1,2\] is not a list of strings/],
      [{ storage: { stateCacheBytes: true } }, /storage\.stateCacheBytes: true is not a non-negative integer/],
    ] as const) {
      assert.throws(() => loadConfig({ config: file(obj) }, {}), (e: Error) => e instanceof ConfigError && pattern.test(e.message), JSON.stringify(obj));
    }
    const c = loadConfig({ config: file({ partitions: "32", gossip: { bp: "false" }, seeds: "127.0.0.2:1,127.0.0.3:1", replicationFactor: 3 }) }, {});
    assert.deepEqual([c.partitions, c.gossip.bp, c.seeds, c.replicationFactor], [32, false, ["127.0.0.2:1", "127.0.0.3:1"], "3"]);
  });

  it("takes sizes and times as plain decimal integers only, from flags, environment and file alike", () => {
    const refused = (flags: Record<string, string>, env: Record<string, string>, pattern: RegExp) =>
      assert.throws(() => loadConfig(flags, env), (e: Error) => e instanceof ConfigError && pattern.test(e.message), JSON.stringify([flags, env]));
    for (const raw of ["1e3", "0x40", "0b11", "0o17", " 12 ", "12 ", "+12", "12.0", "1.5", "1_000", "Infinity", "9007199254740993"]) {
      refused({ partitions: raw }, {}, new RegExp(`--partitions: "${raw.replace(/[.+]/g, "\\$&")}" is not a non-negative integer`));
      refused({ "gossip-interval-ms": raw }, {}, /--gossip-interval-ms: .* is not a non-negative integer/);
      refused({}, { DELTASET_PARTITIONS: raw }, /DELTASET_PARTITIONS: .* is not a non-negative integer/);
      if (raw.trim() !== "") refused({ config: file({ partitions: raw }) }, {}, /partitions: .* is not a non-negative integer/);
    }
    refused({ "replication-factor": " 3 " }, {}, /replication factor must be "all" or a positive integer/);
    refused({ "gossip-loss-rate": "0x1" }, {}, /--gossip-loss-rate: "0x1" is not a number from 0 to 1/);
    refused({ "gossip-loss-rate": " 0.5" }, {}, /is not a number from 0 to 1/);
    assert.equal(loadConfig({ partitions: "012" }, {}).partitions, 12);
    assert.equal(loadConfig({ "gossip-loss-rate": "1e-3" }, {}).gossip.lossRate, 0.001);
    assert.equal(loadConfig({ config: file({ partitions: "1000" }) }, {}).partitions, 1000);
  });

  it("refuses periods short enough to keep an idle node busy, and times longer than a Node timer", () => {
    const refused = (flags: Record<string, string>, pattern: RegExp) =>
      assert.throws(() => loadConfig(flags, {}), (e: Error) => e instanceof ConfigError && pattern.test(e.message), JSON.stringify(flags));
    for (const v of ["0", "9"]) {
      refused({ "gossip-interval-ms": v }, /gossip\.intervalMs \(--gossip-interval-ms\) must be an integer of at least 10 \(ms\)/);
      refused({ "probe-interval-ms": v }, /membership\.probeIntervalMs \(--probe-interval-ms\) must be an integer of at least 10/);
      refused({ "ttl-sweep-ms": v }, /ttlSweep\.periodMs \(--ttl-sweep-ms\) must be an integer of at least 10/);
    }
    refused({ "push-pull-interval-ms": "5" }, /--push-pull-interval-ms\) must be an integer of at least 10 \(ms\), or 0 \(off\)/);
    assert.equal(loadConfig({ "push-pull-interval-ms": "0" }, {}).membership.pushPullIntervalMs, 0);
    assert.equal(loadConfig({ "gossip-interval-ms": "10", "probe-interval-ms": "10", "ttl-sweep-ms": "10" }, {}).gossip.intervalMs, 10);
    refused({ "gossip-rpc-timeout-ms": "0" }, /--gossip-rpc-timeout-ms\) must be a positive integer/);
    refused({ "state-chunk-entries": "0" }, /--state-chunk-entries\) must be a positive integer/);
    // Node would run these timers after 1 ms.
    refused({ "gossip-interval-ms": "2147483648" }, /gossip\.intervalMs \(--gossip-interval-ms\) must be at most 2147483647 ms/);
    refused({ "drain-timeout-ms": "3000000000" }, /drainTimeoutMs \(--drain-timeout-ms\) must be at most 2147483647 ms/);
    refused({ "probe-timeout-ms": "2147483648" }, /--probe-timeout-ms\) must be at most/);
    assert.equal(loadConfig({ "gossip-interval-ms": "2147483647" }, {}).gossip.intervalMs, 2147483647);
  });

  it("refuses bad values with a message naming the setting", () => {
    const bad: Array<[Record<string, string>, Record<string, string>, RegExp]> = [
      [{ partitions: "abc" }, {}, /--partitions: "abc" is not a non-negative integer/],
      [{}, { DELTASET_GOSSIP_RR: "maybe" }, /DELTASET_GOSSIP_RR: "maybe" is not a boolean/],
      [{ listen: "nohostport" }, {}, /listen \(--listen\) "nohostport" is not host:port/],
      [{ listen: "127.0.0.1:99999" }, {}, /listen \(--listen\) "127.0.0.1:99999" is not host:port with a port of 0 to 65535/],
      [{ sync: "sometimes" }, {}, /sync must be "fsync" or "buffered"/],
      [{ partitions: "0" }, {}, /partitions must be 1..65535/],
      [{ "node-id": "has space" }, {}, /node id "has space"/],
      [{ "max-page-size": "5" }, {}, /defaultPageSize exceeds/],
      [{ "max-export-chunk": "5" }, {}, /defaultExportChunk exceeds/],
      [{ "max-message-bytes": "1048576" }, {}, /maxExportChunkBytes exceeds half of limits.maxMessageBytes/],
      [{ "gossip-choose": "random" }, {}, /gossip choose must be/],
      [{ "tls-cert": "/x.pem" }, {}, /tls.cert and tls.key go together/],
      [{ "store-write-buffer-bytes": "100" }, {}, /storage.writeBufferBytes must be an integer of at least 65536/],
      [{ "peer-reconnect-initial-ms": "0" }, {}, /--peer-reconnect-initial-ms\) must be a positive integer/],
      [{ "group-commit-start-operations": "0" }, {}, /--group-commit-start-operations\) must be a positive integer/],
      [{ "gossip-contexts-reply-bytes": "10" }, {}, /--gossip-contexts-reply-bytes\) must be an integer of at least 1024/],
      [{}, { DELTASET_GOSSIP_CONTEXTS_CLAIM_MS: "-1" }, /DELTASET_GOSSIP_CONTEXTS_CLAIM_MS: "-1" is not a non-negative integer/],
      [{ "peer-reconnect-initial-ms": "500", "peer-reconnect-max-ms": "400" }, {}, /--peer-reconnect-max-ms\) must be an integer of at least --peer-reconnect-initial-ms \(500\)/],
    ];
    for (const [flags, env, msg] of bad) assert.throws(() => loadConfig(flags, env), (e: Error) => e instanceof ConfigError && msg.test(e.message));
    assert.throws(() => loadConfig({ config: file({ nosuch: 1 }) }, {}), /unknown setting "nosuch"/);
    assert.throws(() => loadConfig({ config: join(dir, "missing.json") }, {}), /config file .*missing.json/);
    assert.throws(() => loadConfig({ config: file([1, 2]) }, {}), ConfigError);
  });
});
