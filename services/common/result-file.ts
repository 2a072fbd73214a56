// The result document that benchmarks, reproductions and chaos runs write as JSON:
// { machine: {cpus, memory, node, platform, arch, cpuModel}, generatedAt, params, metrics,
//   targets: [{name, target, measured, met, command}] }.
// `met` is always computed from `measured` by the predicate given to target(), in the run that
// writes the file: numbers are never typed in. Charts are drawn from these files by the
// benchmarks (test/bench/charts/), never here.
import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import { dirname } from "node:path";

export interface MachineInfo {
  cpus: number;
  /** Total memory in bytes. */
  memory: number;
  /** Node version, e.g. "v20.20.2". */
  node: string;
  platform: string;
  arch: string;
  cpuModel: string;
}

export type Measured = number | string | boolean | null;

export interface Target {
  name: string;
  /** The goal, in words a reader understands: "<= 2x", "< 40 bytes". */
  target: string;
  measured: Measured;
  met: boolean;
  /** The command that reproduces the measurement. */
  command: string;
}

export interface Results {
  params: Record<string, unknown>;
  metrics: Record<string, unknown>;
  targets: Target[];
}

export function machineInfo(): MachineInfo {
  const cpus = os.cpus();
  return {
    cpus: cpus.length,
    memory: os.totalmem(),
    node: process.version,
    platform: process.platform,
    arch: process.arch,
    cpuModel: cpus[0]?.model.trim() ?? "unknown",
  };
}

/** A target whose `met` is computed from `measured` (a non-finite or null measurement is not met). */
export function target<M extends Measured>(
  name: string,
  goal: string,
  measured: M,
  isMet: (m: M) => boolean,
  command: string,
): Target {
  const usable = measured !== null && (typeof measured !== "number" || Number.isFinite(measured));
  return { name, target: goal, measured, met: usable && isMet(measured), command };
}

/** Write the document for `results` (machine and time added) to `path`; bigint values become strings. */
export function writeResultFile(path: string, results: Results): string {
  mkdirSync(dirname(path), { recursive: true });
  const doc = { machine: machineInfo(), generatedAt: new Date().toISOString(), ...results };
  writeFileSync(path, `${JSON.stringify(doc, (_k, v) => (typeof v === "bigint" ? v.toString() : v), 2)}\n`);
  return path;
}
