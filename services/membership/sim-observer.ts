// Measures a simulation against the ground truth it knows: which processes really run. Counts
// false suspicions and false deaths (a running process accused), and times how long a crash takes
// to be noticed (first SUSPECT or DEAD anywhere) and to be DEAD in every running view, and how long
// a graceful leave takes to be LEFT everywhere.
import type { MembershipSimulation } from "./simulator.js";
import { MemberState, isDeparted } from "./types.js";

export interface DepartureRecord {
  nodeId: string;
  kind: "crash" | "leave";
  at: number;
  /** Highest incarnation of the departed process; accusations at or below it are about it. */
  incarnation: bigint;
  /** First SUSPECT/DEAD of it anywhere (crashes). */
  detectedAt?: number;
  /** Every running member holds it DEAD/LEFT or has forgotten it. */
  settledAt?: number;
  /** The node came back before this departure settled: left out of the timings. */
  censored: boolean;
}

export interface FalseAccusation {
  observer: string;
  nodeId: string;
  kind: "suspect" | "dead" | "left";
  incarnation: bigint;
  at: number;
}

export class SimulationObserver {
  readonly departures: DepartureRecord[] = [];
  readonly falseAccusations: FalseAccusation[] = [];
  private readonly open = new Map<string, DepartureRecord>();
  private readonly leaving = new Set<string>();

  constructor(private readonly sim: MembershipSimulation, sampleEveryMs = 100) {
    sim.onLifecycle((event) => {
      if (event.kind === "start") {
        this.leaving.delete(event.nodeId);
        const record = this.open.get(event.nodeId);
        if (record) {
          if (record.settledAt === undefined) record.censored = true;
          this.open.delete(event.nodeId);
        }
        return;
      }
      if (event.kind === "leave") {
        this.leaving.add(event.nodeId);
        return;
      }
      const kind = this.leaving.has(event.nodeId) ? "leave" : "crash";
      const record: DepartureRecord = { nodeId: event.nodeId, kind, at: event.at, incarnation: event.pastIncarnation, censored: false };
      this.departures.push(record);
      this.open.set(event.nodeId, record);
    });
    sim.onChange((observer, change, at) => {
      const subject = change.member.nodeId;
      if (change.kind !== "suspect" && change.kind !== "dead" && change.kind !== "left") return;
      if (sim.isRunning(subject) && !this.leaving.has(subject)) {
        // Accusations at or below an earlier process's incarnation are about that process.
        if (change.member.incarnation > sim.node(subject).pastIncarnation) {
          this.falseAccusations.push({ observer, nodeId: subject, kind: change.kind, incarnation: change.member.incarnation, at });
        }
        return;
      }
      const record = this.open.get(subject);
      if (record && record.detectedAt === undefined && change.member.incarnation <= record.incarnation) {
        record.detectedAt = at;
      }
    });
    sim.every(sampleEveryMs, () => this.settle());
  }

  /** Events of this kind about running processes, over all observers. */
  count(kind: FalseAccusation["kind"]): number {
    return this.falseAccusations.filter((a) => a.kind === kind).length;
  }

  /** Distinct accusations (member, incarnation) of this kind: one false suspicion seen by many counts once. */
  distinct(kind: FalseAccusation["kind"]): number {
    return new Set(this.falseAccusations.filter((a) => a.kind === kind).map((a) => `${a.nodeId}@${a.incarnation}`)).size;
  }

  /** Departures of this kind that settled without the node coming back. */
  settled(kind: "crash" | "leave"): DepartureRecord[] {
    return this.departures.filter((d) => d.kind === kind && !d.censored && d.settledAt !== undefined);
  }

  /** Departures still not settled (and not censored). */
  unsettled(): DepartureRecord[] {
    return this.departures.filter((d) => !d.censored && d.settledAt === undefined);
  }

  private settle(): void {
    const now = this.sim.now;
    const observers = this.sim.runningIds().filter((id) => !this.leaving.has(id));
    for (const record of this.open.values()) {
      if (record.settledAt !== undefined) continue;
      let done = true;
      for (const id of observers) {
        const seen = this.sim.core(id).member(record.nodeId);
        if (!seen || seen.incarnation > record.incarnation) continue;
        if (!isDeparted(seen.state)) { done = false; break; }
        if (record.kind === "leave" && seen.state !== MemberState.LEFT) { done = false; break; }
      }
      if (done) {
        record.settledAt = now;
        if (record.kind === "crash" && record.detectedAt === undefined) record.detectedAt = now;
      }
    }
  }
}

/** The q-quantile (0..1) of the values, nearest rank; NaN when empty. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank]!;
}
