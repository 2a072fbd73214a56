// The three dynamicity models of the seed 000 simulator (shared/notes/seed-000.md section 6.1),
// applied to a membership simulation once per step:
// - static: the node set never changes;
// - intermediate: with probability churnRate a running node leaves for good and a fresh node takes
//   its place (the size stays fixed);
// - dynamic: a node leaves (leaveProbability), nothing happens, or a node joins (joinProbability);
//   a join revives a retired node when there is one (same id, rejoin), else adds a new node.
// A departure is a crash (silent) with probability crashFraction, otherwise a graceful leave.
import { randomInt, type Random } from "../common/prng.js";
import type { MembershipSimulation } from "./simulator.js";

export type ChurnModel = "static" | "intermediate" | "dynamic";

export interface ChurnOptions {
  model: ChurnModel;
  /** Virtual time between two steps. */
  stepMs: number;
  steps: number;
  /** Intermediate model: replacement probability per step. */
  churnRate?: number;
  /** Dynamic model. */
  leaveProbability?: number;
  joinProbability?: number;
  /** Share of departures that are crashes rather than graceful leaves. */
  crashFraction?: number;
  /** Never shrink below this many running nodes. */
  minNodes?: number;
}

export interface ChurnCounts {
  crashes: number;
  leaves: number;
  fresh: number;
  rejoins: number;
}

/** Schedule the churn steps on the simulation, starting now. Returns live counters. */
export function scheduleChurn(sim: MembershipSimulation, options: ChurnOptions, random: Random): ChurnCounts {
  const counts: ChurnCounts = { crashes: 0, leaves: 0, fresh: 0, rejoins: 0 };
  const churnRate = options.churnRate ?? 0.01;
  const leaveP = options.leaveProbability ?? 0.1;
  const joinP = options.joinProbability ?? 0.1;
  const crashFraction = options.crashFraction ?? 0.5;
  const minNodes = options.minNodes ?? 3;
  const retired: string[] = [];

  const depart = (permanent: boolean): void => {
    const candidates = sim.runningIds().filter((id) => !sim.core(id).left);
    if (candidates.length <= minNodes) return;
    const nodeId = candidates[randomInt(random, candidates.length)]!;
    if (random() < crashFraction) {
      sim.crash(nodeId);
      counts.crashes++;
    } else {
      sim.leave(nodeId);
      counts.leaves++;
    }
    if (!permanent) retired.push(nodeId);
  };

  const join = (): void => {
    // A retired node can only come back once its leave has finished (it has stopped).
    const ready = retired.filter((id) => !sim.isRunning(id));
    if (ready.length > 0) {
      const nodeId = ready[randomInt(random, ready.length)]!;
      retired.splice(retired.indexOf(nodeId), 1);
      sim.restart(nodeId);
      counts.rejoins++;
    } else {
      sim.addNode();
      counts.fresh++;
    }
  };

  for (let step = 1; step <= options.steps; step++) {
    sim.at(sim.now + step * options.stepMs, () => {
      switch (options.model) {
        case "static":
          return;
        case "intermediate":
          if (random() < churnRate) {
            depart(true);
            sim.addNode();
            counts.fresh++;
          }
          return;
        case "dynamic": {
          const r = random();
          if (r < leaveP) depart(false);
          else if (r >= 1 - joinP) join();
          return;
        }
      }
    });
  }
  return counts;
}
