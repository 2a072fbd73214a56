// The fuzz run: starts a real node (with a cluster key, so peer frames are checked) and a fake
// member beside it on loopback, writes the control set and counter, then sends batches of frames
// to every method of Replica, Gossip and Membership: mutants of valid frames (mutators.ts) and
// random bytes, peer frames mostly signed with the cluster key over their exact bytes and some
// unsigned. After each batch: the process is alive, Health says SERVING, the control values are
// unchanged (control.ts). Bounded by a frame count and a time limit. Frame i is a pure function of
// the seed, so a finding names the seed and index that reproduce it.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { type Random, pick, seededRandom } from "../../services/common/prng.ts";
import { call, membershipClient } from "../../services/client/rpc.ts";
import { JoinRequest, MemberState, MembershipService } from "../../services/gen/deltaset/v1/membership.ts";
import { generateClusterKey, parseClusterKeys } from "../../services/node/cluster-keys.ts";
import { type NodeProcess, startNodeProcess } from "../helpers/node-process.ts";
import { addressesAllowed } from "./address-guard.ts";
import { claimedSender } from "./sender-claim.ts";
import { Control } from "./control.ts";
import { startFakePeer } from "./fake-peer.ts";
import { mutate, randomFrame } from "./mutators.ts";
import { RawSender, type Signer } from "./sender.ts";
import { type MethodSeeds, seedFrames } from "./seeds.ts";

export interface FuzzOptions {
  frames: number;
  maxSeconds: number;
  seed: number;
  /** Frames between health and control checks. */
  batch: number;
  /** Calls in flight. */
  concurrency: number;
  /** Run the node with a cluster key (peer frames signed); false: an open loopback node. */
  clusterKey: boolean;
  /** Share of peer frames that carry a valid proof (when there is a key). */
  signedShare: number;
  /** Share of frames that are random bytes instead of mutants. */
  randomShare: number;
  /** Loopback addresses for the node and the fake member. */
  nodeHost: string;
  peerHost: string;
  /** Extra node flags. */
  nodeArgs: string[];
  progress?: (line: string) => void;
}

export const DEFAULTS: FuzzOptions = {
  frames: 10_000,
  maxSeconds: 60,
  seed: 13,
  batch: 2_000,
  concurrency: 48,
  clusterKey: true,
  signedShare: 0.8,
  randomShare: 0.1,
  nodeHost: "127.0.0.213",
  peerHost: "127.0.0.214",
  nodeArgs: [],
};

export interface Finding {
  method: string;
  status: string;
  details: string;
  frameIndex: number;
  signed: boolean;
  mutation: string;
  length: number;
  /** The first 64 bytes of the frame (of the first chunk for a client stream), hex. */
  hexPrefix: string;
}

export interface FuzzResult {
  framesSent: number;
  seconds: number;
  framesPerSecond: number;
  batches: number;
  statusCounts: Record<string, number>;
  perMethod: Record<string, Record<string, number>>;
  mutations: Record<string, number>;
  signedFrames: number;
  unsignedPeerFrames: number;
  randomFrames: number;
  /** Mutants not sent because they named an address outside the fuzzer's own (address-guard.ts). */
  filteredFrames: number;
  crashes: number;
  corruptions: number;
  corruptionDetails: string[];
  unhealthyChecks: number;
  /** INTERNAL or UNKNOWN answers. */
  internalOrUnknown: number;
  /** DEADLINE_EXCEEDED on a call that should end by itself (Watch excluded). */
  deadlineExceeded: number;
  findings: Finding[];
  rejoins: number;
  nodeCallsToFakePeer: Record<string, number>;
  nodeExitCode: number | null;
  stoppedBy: "frames" | "time" | "crash";
}

const WATCH_DEADLINE_MS = 100;
const CALL_DEADLINE_MS = 10_000;
/** The fuzzed node's id, which signed calls name as their receiver. */
const TARGET_ID = "fz-target";
const MAX_FINDINGS = 100;
/** Watch streams never end by themselves: sent less often, each ended by a short deadline. */
const WEIGHT: Record<string, number> = { [MembershipService.watch.path]: 0.25 };

const statusName = (code: number) => grpc.status[code] ?? String(code);
const methodName = (path: string) => path.slice("/deltaset.v1.".length);

function weightedPicker(methods: MethodSeeds[]): (r: Random) => MethodSeeds {
  const weights = methods.map((m) => WEIGHT[m.path] ?? 1);
  const total = weights.reduce((a, b) => a + b, 0);
  return (r) => {
    let x = r() * total;
    for (let i = 0; i < methods.length; i++) {
      x -= weights[i]!;
      if (x < 0) return methods[i]!;
    }
    return methods[methods.length - 1]!;
  };
}

interface Planned {
  index: number;
  method: MethodSeeds;
  frames: Buffer[];
  signed: boolean;
  mutation: string;
}

export async function runFuzz(partial: Partial<FuzzOptions> = {}): Promise<FuzzResult> {
  const o: FuzzOptions = { ...DEFAULTS, ...partial };
  const log = o.progress ?? (() => {});
  const dir = mkdtempSync(join(tmpdir(), "deltaset-fuzz-"));
  const peerId = "fz-peer";
  const keyText = generateClusterKey();
  const keys = parseClusterKeys(keyText, "fuzz");
  const keyFile = join(dir, "cluster.key");
  writeFileSync(keyFile, `${keyText}\n`, { mode: 0o600 });

  const peer = await startFakePeer(o.peerHost, peerId, o.clusterKey ? keys : undefined);
  let node: NodeProcess | undefined;
  let sender: RawSender | undefined;
  let control: Control | undefined;
  const members = { client: undefined as ReturnType<typeof membershipClient> | undefined };
  try {
    node = await startNodeProcess([
      "--listen", `${o.nodeHost}:0`, "--node-id", TARGET_ID, "--data-dir", join(dir, "data"),
      ...(o.clusterKey ? ["--cluster-key-file", keyFile] : []),
      ...o.nodeArgs,
    ]);
    const n = node;
    const raw = (sender = new RawSender(n.address));
    control = new Control(n.address);
    members.client = membershipClient(n.address);
    const signer: Signer | undefined = o.clusterKey ? { keys, nodeId: peerId, to: TARGET_ID } : undefined;
    const deadAddress = `${o.peerHost}:1`;
    const allowed = new Set([peer.address, deadAddress]);
    const random = seededRandom(o.seed);
    const methods = seedFrames({ peerId, peerAddress: peer.address, deadAddress, cluster: "deltaset", partitions: 64, random: seededRandom(o.seed ^ 0x5eed) });
    const pickMethod = weightedPicker(methods);

    // The fake member joins (signed, as itself) so the node accepts Gossip sent in its name.
    let incarnation = 0n;
    const rejoin = async () => {
      const frame = Buffer.from(JoinRequest.encode({ cluster: "deltaset", self: { nodeId: peerId, address: peer.address, state: MemberState.ALIVE, incarnation: incarnation++, sinceUnixMs: 0n } }).finish());
      return raw.send(MembershipService.join.path, "unary", [frame], signer, CALL_DEADLINE_MS);
    };
    const joined = await rejoin();
    if (joined.code !== 0) throw new Error(`fake member could not join: ${statusName(joined.code)} ${joined.details}`);
    await control.write();

    const r: FuzzResult = {
      framesSent: 0, seconds: 0, framesPerSecond: 0, batches: 0, statusCounts: {}, perMethod: {}, mutations: {},
      signedFrames: 0, unsignedPeerFrames: 0, randomFrames: 0, filteredFrames: 0, crashes: 0, corruptions: 0, corruptionDetails: [],
      unhealthyChecks: 0, internalOrUnknown: 0, deadlineExceeded: 0, findings: [], rejoins: 0, nodeCallsToFakePeer: peer.calls, nodeExitCode: null, stoppedBy: "frames",
    };

    let index = 0;
    const plan = (): Planned => {
      for (;;) {
        const method = pickMethod(random);
        const isRandom = random() < o.randomShare;
        const chunks = method.kind === "clientStream" || method.kind === "bidiStream" ? 1 + Math.floor(random() * 3) : 1;
        const frames: Buffer[] = [];
        let mutation = "random";
        for (let c = 0; c < chunks; c++) {
          const seed = pick(random, method.seeds);
          if (isRandom) frames.push(randomFrame(seed, random));
          else if (c > 0 && random() < 0.5) frames.push(seed);
          else {
            const m = mutate(seed, random);
            frames.push(m.bytes);
            mutation = m.kind;
          }
        }
        const signed = method.peer && signer !== undefined && random() < o.signedShare;
        const i = index++;
        if (!frames.every((f) => addressesAllowed(method.path, f, allowed))) {
          r.filteredFrames++;
          continue;
        }
        return { index: i, method, frames, signed, mutation };
      }
    };

    const started = performance.now();
    const elapsed = () => (performance.now() - started) / 1000;
    const record = (p: Planned, code: number, details: string) => {
      const name = methodName(p.method.path);
      const s = statusName(code);
      r.framesSent++;
      r.statusCounts[s] = (r.statusCounts[s] ?? 0) + 1;
      const pm = (r.perMethod[name] ??= {});
      pm[s] = (pm[s] ?? 0) + 1;
      r.mutations[p.mutation] = (r.mutations[p.mutation] ?? 0) + 1;
      if (p.signed) r.signedFrames++;
      else if (p.method.peer) r.unsignedPeerFrames++;
      if (p.mutation === "random") r.randomFrames++;
      const internal = code === grpc.status.INTERNAL || code === grpc.status.UNKNOWN;
      const hung = code === grpc.status.DEADLINE_EXCEEDED && p.method.path !== MembershipService.watch.path;
      if (internal) r.internalOrUnknown++;
      if (hung) r.deadlineExceeded++;
      if ((internal || hung) && r.findings.length < MAX_FINDINGS) {
        const f = p.frames[0]!;
        r.findings.push({ method: name, status: s, details: details.slice(0, 300), frameIndex: p.index, signed: p.signed, mutation: p.mutation, length: f.length, hexPrefix: f.subarray(0, 64).toString("hex") });
      }
    };

    const alive = () => n.child.exitCode === null && n.child.signalCode === null;
    while (r.framesSent < o.frames) {
      if (elapsed() >= o.maxSeconds) {
        r.stoppedBy = "time";
        break;
      }
      const target = Math.min(o.batch, o.frames - r.framesSent);
      let planned = 0;
      const worker = async () => {
        while (planned < target && alive()) {
          planned++;
          const p = plan();
          const deadline = p.method.path === MembershipService.watch.path ? WATCH_DEADLINE_MS : CALL_DEADLINE_MS;
          const as = p.signed ? { keys, nodeId: claimedSender(p.method.path, p.frames[0]!, peerId), to: TARGET_ID } : undefined;
          const out = await raw.send(p.method.path, p.method.kind, p.frames, as, deadline);
          record(p, out.code, out.details);
        }
      };
      await Promise.all(Array.from({ length: o.concurrency }, worker));
      r.batches++;
      if (!alive()) {
        r.crashes++;
        r.stoppedBy = "crash";
        log(`node died: exit ${n.child.exitCode} signal ${n.child.signalCode}\n${n.logs().slice(-4000)}`);
        break;
      }
      const check = await control.check();
      if (!check.healthy) r.unhealthyChecks++;
      if (check.corruptions.length > 0) {
        r.corruptions++;
        if (r.corruptionDetails.length < 20) r.corruptionDetails.push(`after frame ${r.framesSent}: ${check.corruptions.join("; ")}`);
      }
      // Mutants may make the fake member LEFT or DEAD (its own authenticated claims): rejoin it.
      const view = await call(members.client, members.client.members, { includeDeparted: false }).catch(() => undefined);
      if (view !== undefined && !view.members.some((m) => m.nodeId === peerId && m.state === MemberState.ALIVE)) {
        r.rejoins++;
        await rejoin();
      }
      const t = elapsed();
      log(`${r.framesSent} frames, ${t.toFixed(0)} s, ${(r.framesSent / t).toFixed(0)}/s, internal/unknown ${r.internalOrUnknown}, deadline ${r.deadlineExceeded}, corruptions ${r.corruptions}, unhealthy ${r.unhealthyChecks}`);
    }
    r.seconds = elapsed();
    r.framesPerSecond = r.framesSent / r.seconds;
    if (alive()) r.nodeExitCode = await n.stop();
    else r.nodeExitCode = n.child.exitCode;
    return r;
  } finally {
    members.client?.close();
    control?.close();
    sender?.close();
    await node?.kill();
    await peer.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
