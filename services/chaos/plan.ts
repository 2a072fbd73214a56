// Fault scenarios as plans: a pure function of the scenario name, the node ids, the length of
// the fault phase and a seeded random source, giving timed steps (cut these links, add this
// toxic, kill that node, heal the links, ...). The runner carries them out; everything is healed
// after the fault phase whatever the plan did. A plan is data, so a seed reproduces a run's faults.
import { pick, randomInt, shuffled, type Random } from "../common/prng.js";

/** A directed link: traffic that `from` sends to `to` (its requests and the replies). */
export type LinkRef = [from: string, to: string];

export interface ToxicDef {
  type: "latency" | "bandwidth" | "reset_peer" | "slicer" | "timeout";
  /** Which direction of the link's connections. */
  streams: Array<"upstream" | "downstream">;
  attributes: Record<string, number>;
  toxicity?: number;
}

export type FaultAction =
  | { kind: "cut"; links: LinkRef[] }
  | { kind: "toxic"; links: LinkRef[]; toxic: ToxicDef }
  /** Remove every toxic and re-enable every proxy. */
  | { kind: "heal-links" }
  | { kind: "kill"; node: string }
  | { kind: "restart"; node: string }
  | { kind: "pause"; node: string }
  | { kind: "resume"; node: string }
  | { kind: "leave"; node: string }
  | { kind: "rejoin"; node: string };

export interface PlannedStep {
  /** Milliseconds after the fault phase began. */
  atMs: number;
  action: FaultAction;
}

export interface FaultPlan {
  scenario: string;
  faultMs: number;
  steps: PlannedStep[];
}

/** The scenarios `deltaset chaos run` knows, in the order chaos:all runs them. */
export const SCENARIOS = [
  "partition-halves",
  "isolate-one",
  "asymmetric-cut",
  "latency",
  "bandwidth",
  "reset-storm",
  "kill-restart",
  "pause-resume",
  "churn",
  "mix",
] as const;

/** Extra scenarios (not in chaos:all) and names other tools use for the same faults. */
export const EXTRA_SCENARIOS = ["slicer"] as const;
export const SCENARIO_ALIASES: Record<string, string> = {
  "partition-one": "isolate-one",
  "latency-jitter": "latency",
  "bandwidth-limit": "bandwidth",
  "reset-peer": "reset-storm",
  "packet-slicer": "slicer",
};

/** Scenarios that signal node processes (not possible against an external cluster). */
export const PROCESS_SCENARIOS = new Set(["kill-restart", "pause-resume", "churn"]);

export function resolveScenario(name: string): string | undefined {
  const n = SCENARIO_ALIASES[name] ?? name;
  return (SCENARIOS as readonly string[]).includes(n) || (EXTRA_SCENARIOS as readonly string[]).includes(n) ? n : undefined;
}

export const LATENCY: ToxicDef = { type: "latency", streams: ["upstream", "downstream"], attributes: { latency: 100, jitter: 50 } };
export const BANDWIDTH: ToxicDef = { type: "bandwidth", streams: ["upstream", "downstream"], attributes: { rate: 64 } };
export const SLICER: ToxicDef = { type: "slicer", streams: ["upstream", "downstream"], attributes: { average_size: 64, size_variation: 32, delay: 200 } };
export const RESET_PEER: ToxicDef = { type: "reset_peer", streams: ["upstream"], attributes: { timeout: 100 } };

/** Every directed link among the nodes. */
export function allLinks(nodes: readonly string[]): LinkRef[] {
  return nodes.flatMap((a) => nodes.filter((b) => b !== a).map((b): LinkRef => [a, b]));
}

/** Both directions of every link between the two groups. */
export function between(a: readonly string[], b: readonly string[]): LinkRef[] {
  return a.flatMap((x) => b.flatMap((y): LinkRef[] => [[x, y], [y, x]]));
}

type Window = (start: number, length: number, nodes: readonly string[], random: Random) => PlannedStep[];

const step = (atMs: number, action: FaultAction): PlannedStep => ({ atMs: Math.round(atMs), action });

/** One fault window per primitive: the fault at `start`, its undo at `start + length`. */
const WINDOWS: Record<string, Window> = {
  "partition-halves": (t, len, nodes, random) => {
    const order = shuffled(random, nodes);
    const half = Math.floor(order.length / 2);
    return [step(t, { kind: "cut", links: between(order.slice(0, half), order.slice(half)) }), step(t + len, { kind: "heal-links" })];
  },
  "isolate-one": (t, len, nodes, random) => {
    const x = pick(random, nodes);
    return [step(t, { kind: "cut", links: between([x], nodes.filter((n) => n !== x)) }), step(t + len, { kind: "heal-links" })];
  },
  "asymmetric-cut": (t, len, nodes, random) => {
    const [a, b] = shuffled(random, nodes) as [string, string];
    return [step(t, { kind: "cut", links: [[a, b]] }), step(t + len, { kind: "heal-links" })];
  },
  latency: (t, len, nodes) => [step(t, { kind: "toxic", links: allLinks(nodes), toxic: LATENCY }), step(t + len, { kind: "heal-links" })],
  bandwidth: (t, len, nodes) => [step(t, { kind: "toxic", links: allLinks(nodes), toxic: BANDWIDTH }), step(t + len, { kind: "heal-links" })],
  slicer: (t, len, nodes) => [step(t, { kind: "toxic", links: allLinks(nodes), toxic: SLICER }), step(t + len, { kind: "heal-links" })],
  "reset-storm": (t, len, nodes, random) => {
    // Flaps: reset half of the links for a while, heal, again with another half.
    const out: PlannedStep[] = [];
    const period = 1200;
    for (let at = t; at + period / 2 <= t + len; at += period) {
      const links = shuffled(random, allLinks(nodes));
      out.push(step(at, { kind: "toxic", links: links.slice(0, Math.max(1, Math.ceil(links.length / 2))), toxic: RESET_PEER }));
      out.push(step(at + period / 2, { kind: "heal-links" }));
    }
    return out;
  },
  "kill-restart": (t, len, nodes, random) => {
    const x = pick(random, nodes);
    return [step(t, { kind: "kill", node: x }), step(t + len, { kind: "restart", node: x })];
  },
  "pause-resume": (t, len, nodes, random) => {
    const x = pick(random, nodes);
    return [step(t, { kind: "pause", node: x }), step(t + len, { kind: "resume", node: x })];
  },
  churn: (t, len, nodes, random) => {
    const x = pick(random, nodes);
    return [step(t, { kind: "leave", node: x }), step(t + len, { kind: "rejoin", node: x })];
  },
};

const MIX_PRIMITIVES = ["partition-halves", "isolate-one", "asymmetric-cut", "latency", "bandwidth", "reset-storm", "kill-restart", "pause-resume", "churn"];

/**
 * The plan of a scenario. Windows are separated by short healed gaps; most scenarios use two
 * windows (two different draws of the victim or the split), latency/bandwidth/slicer one long
 * window, churn one window per node (one node away at a time), mix a seeded random sequence of
 * 2-5 s windows of the other kinds.
 */
export function planScenario(
  scenario: string,
  opts: { nodes: readonly string[]; faultMs: number; random: Random; /** Signals to node processes allowed (default true). */ processFaults?: boolean },
): FaultPlan {
  const name = resolveScenario(scenario);
  if (name === undefined) throw new RangeError(`unknown scenario "${scenario}"`);
  const { nodes, faultMs, random } = opts;
  const processFaults = opts.processFaults ?? true;
  if (!processFaults && PROCESS_SCENARIOS.has(name)) throw new RangeError(`scenario "${name}" signals node processes; not possible here`);
  if (nodes.length < 2) throw new RangeError("a fault scenario needs at least 2 nodes");
  const steps: PlannedStep[] = [];
  const gap = Math.min(2000, Math.floor(faultMs / 6));
  if (name === "mix") {
    let t = 0;
    while (t < faultMs - 2000) {
      const kind = pick(random, MIX_PRIMITIVES.filter((k) => processFaults || !PROCESS_SCENARIOS.has(k)));
      const len = Math.min(2000 + randomInt(random, 3001), faultMs - t);
      steps.push(...WINDOWS[kind]!(t, len, nodes, random));
      t += len + 1000;
    }
  } else if (name === "latency" || name === "bandwidth" || name === "slicer") {
    steps.push(...WINDOWS[name]!(0, faultMs, nodes, random));
  } else if (name === "churn") {
    const order = shuffled(random, nodes);
    const count = Math.max(1, Math.min(order.length, Math.floor(faultMs / 4000)));
    const len = Math.floor(faultMs / count) - gap;
    for (let i = 0; i < count; i++) {
      const t = i * (len + gap);
      steps.push(step(t, { kind: "leave", node: order[i]! }), step(t + len, { kind: "rejoin", node: order[i]! }));
    }
  } else {
    const len = Math.floor((faultMs - gap) / 2);
    steps.push(...WINDOWS[name]!(0, len, nodes, random), ...WINDOWS[name]!(len + gap, faultMs - len - gap, nodes, random));
  }
  steps.sort((a, b) => a.atMs - b.atMs);
  return { scenario: name, faultMs, steps };
}

/** A one-line description of a step, for logs and the result file. */
export function describeAction(a: FaultAction): string {
  switch (a.kind) {
    case "cut":
      return `cut ${a.links.map(([x, y]) => `${x}->${y}`).join(" ")}`;
    case "toxic":
      return `${a.toxic.type} ${JSON.stringify(a.toxic.attributes)} on ${a.links.length} link(s)`;
    case "heal-links":
      return "heal links";
    default:
      return `${a.kind} ${a.node}`;
  }
}
