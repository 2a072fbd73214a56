// CPU time of local processes from /proc (Linux), for benchmarks that compare servers' costs.
import { readFileSync } from "node:fs";

/** utime + stime of a /proc stat file, in seconds (clock ticks of 1/100 s). */
function statCpuSeconds(path: string): number {
  const fields = readFileSync(path, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** CPU seconds (user + system) a process has used so far, all threads. */
export function cpuSecondsOf(pid: number): number {
  return statCpuSeconds(`/proc/${pid}/stat`);
}

/** CPU seconds (user + system) of a process's main thread, the one that runs its event loop. */
export function mainThreadCpuSecondsOf(pid: number): number {
  return statCpuSeconds(`/proc/${pid}/task/${pid}/stat`);
}
