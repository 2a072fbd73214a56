// Offline stand-ins for docker, kind, kubectl and npx, for the tests of the kind runners
// (deploy/kind/run-*.sh): each logs its arguments; `kubectl port-forward` becomes a small loopback
// listener on the requested local ports that records its pid and exits by itself after 60 s.
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const SYSTEM_PATH = "/usr/bin:/bin";

export interface Sandbox {
  dir: string;
  bin: string;
  log: string;
  pids: string;
  results: string;
}

/** npx: its bash body (after the logging line); the default fails on "bad" and sleeps on "slow". */
export function sandbox(tools: string[] = ["docker", "kind", "kubectl", "npx"], npx = `case " $* " in *" bad "*) exit 1 ;; *" slow "*) sleep 1 ;; esac; exit 0`): Sandbox {
  const dir = mkdtempSync(join(tmpdir(), "deltaset-run-chaos-"));
  const bin = join(dir, "bin");
  const s: Sandbox = { dir, bin, log: join(dir, "calls.log"), pids: join(dir, "forward.pids"), results: join(dir, "results") };
  spawnSync("mkdir", ["-p", bin]);
  const listener = join(dir, "listener.cjs");
  writeFileSync(
    listener,
    `const net = require("node:net");
for (const p of process.argv.slice(2)) net.createServer((c) => c.destroy()).listen(Number(p), "127.0.0.1");
setTimeout(() => process.exit(0), 60000);
`,
  );
  const scripts: Record<string, string> = {
    docker: `exit 0`,
    kind: `case "$1 $2" in "get clusters") echo deltaset ;; esac; exit 0`,
    kubectl: `case " $* " in
  *" get pods "*) printf 'deltaset-1\\ndeltaset-0\\n' ;;
  *" port-forward "*)
    ports=""
    for a in "$@"; do case "$a" in [0-9]*:[0-9]*) ports="$ports \${a%%:*}" ;; esac; done
    echo $$ >> "${s.pids}"
    exec "${process.execPath}" "${listener}" $ports ;;
esac
exit 0`,
    npx,
  };
  for (const tool of tools) {
    const file = join(bin, tool);
    writeFileSync(file, `#!/bin/bash\necho "${tool} $*" >> "${s.log}"\n${scripts[tool]}\n`);
    chmodSync(file, 0o755);
  }
  return s;
}

export function calls(s: Sandbox): string[] {
  return existsSync(s.log) ? readFileSync(s.log, "utf8").trim().split("\n") : [];
}

export function forwardPids(s: Sandbox): number[] {
  return existsSync(s.pids) ? readFileSync(s.pids, "utf8").trim().split("\n").map(Number) : [];
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export function cleanup(s: Sandbox): void {
  for (const pid of forwardPids(s)) if (alive(pid)) process.kill(pid, "SIGKILL");
  rmSync(s.dir, { recursive: true, force: true });
}

/** `count` consecutive free loopback ports (default four: two pods × gRPC + Toxiproxy API). */
export async function freeBasePort(count = 4): Promise<number> {
  const canListen = (port: number) =>
    new Promise<boolean>((resolve) => {
      const srv = createServer();
      srv.once("error", () => resolve(false));
      srv.listen(port, "127.0.0.1", () => srv.close(() => resolve(true)));
    });
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20000 + count * Math.floor(Math.random() * Math.floor(40000 / count));
    const ok = await Promise.all(Array.from({ length: count }, (_, i) => canListen(base + i)));
    if (ok.every(Boolean)) return base;
  }
  throw new Error("no free ports");
}

export function env(s: Sandbox, extra: Record<string, string>): NodeJS.ProcessEnv {
  return { PATH: `${s.bin}:${SYSTEM_PATH}`, HOME: s.dir, RESULTS_DIR: s.results, ...extra };
}
