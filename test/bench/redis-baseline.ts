// Redis SADD beside deltaset's Add in bench:replica: a redis-server (Debian's package) started on
// a loopback port with AOF everysec, driven by a minimal RESP client (SADD and its integer reply
// are all it needs). Unpipelined: C connections each waiting for every reply; pipelined: batches
// of B commands per round trip. Returns undefined when redis-server is not installed.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface RedisServer {
  port: number;
  close(): Promise<void>;
}

export function redisAvailable(): boolean {
  return spawnSync("redis-server", ["--version"], { stdio: "ignore" }).status === 0;
}

export async function startRedis(host: string, port: number): Promise<RedisServer> {
  const dir = mkdtempSync(join(tmpdir(), "deltaset-bench-redis-"));
  const child: ChildProcess = spawn("redis-server", ["--bind", host, "--port", String(port), "--dir", dir, "--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--protected-mode", "no"], { stdio: "ignore" });
  const until = Date.now() + 10_000;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect({ host, port }, () => (s.end(), resolve(true)));
      s.on("error", () => resolve(false));
    });
    if (ok) break;
    if (Date.now() > until) throw new Error("redis-server did not listen within 10 s");
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    port,
    close: async () => {
      child.kill("SIGTERM");
      await new Promise((r) => child.once("exit", r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const sadd = (key: string, member: string) => `*3\r\n$4\r\nSADD\r\n$${Buffer.byteLength(key)}\r\n${key}\r\n$${Buffer.byteLength(member)}\r\n${member}\r\n`;

/** One connection sending `batch` SADDs per round trip until `until` (ms, performance.now()) or `limit` members; returns commands answered. */
async function connectionLoop(host: string, port: number, key: string, prefix: string, batch: number, until: number, members?: { from: number; to: number; name: (i: number) => string }): Promise<number> {
  const socket = net.connect({ host, port });
  socket.setNoDelay(true);
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  let answered = 0;
  let pending = 0;
  let buffered = "";
  let wake: (() => void) | undefined;
  socket.on("data", (d: Buffer) => {
    buffered += d.toString("latin1");
    // Integer replies (":1\r\n") and errors ("-ERR ...\r\n") are one line each.
    let i: number;
    while ((i = buffered.indexOf("\r\n")) >= 0) {
      if (buffered[0] === "-") throw new Error(`redis: ${buffered.slice(0, i)}`);
      buffered = buffered.slice(i + 2);
      pending--;
      answered++;
    }
    if (pending === 0) wake?.();
  });
  let n = members?.from ?? 0;
  while (members ? n < members.to : performance.now() < until) {
    let out = "";
    let sent = 0;
    for (let j = 0; j < batch && (!members || n < members.to); j++, sent++) out += sadd(key, members ? members.name(n++) : `${prefix}${n++}`);
    pending += sent;
    const drained = new Promise<void>((r) => (wake = r));
    socket.write(out, "latin1");
    await drained;
  }
  socket.end();
  return answered;
}

/** SADDs per second over `connections` connections, `batch` commands per round trip each. */
export async function saddRate(host: string, port: number, connections: number, batch: number, seconds: number, tag: string): Promise<number> {
  const start = performance.now();
  const until = start + seconds * 1000;
  const counts = await Promise.all(Array.from({ length: connections }, (_, c) => connectionLoop(host, port, `${tag}-${c % 8}`, `${tag}-${c}-`, batch, until)));
  return counts.reduce((a, b) => a + b, 0) / ((performance.now() - start) / 1000);
}

/** Fill one set with n members named by name(i), pipelined over `connections` connections. */
export async function saddFill(host: string, port: number, key: string, n: number, name: (i: number) => string, connections = 4, batch = 1000): Promise<void> {
  const per = Math.ceil(n / connections);
  await Promise.all(
    Array.from({ length: connections }, (_, c) => connectionLoop(host, port, key, "", batch, Infinity, { from: c * per, to: Math.min(n, (c + 1) * per), name })),
  );
}

/** used_memory from INFO memory (bytes). */
export async function redisUsedMemory(host: string, port: number): Promise<number> {
  const socket = net.connect({ host, port });
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  const text = await new Promise<string>((resolve, reject) => {
    let got = "";
    socket.on("data", (d: Buffer) => {
      got += d.toString("latin1");
      // A bulk string: "$<len>\r\n<body>\r\n".
      const head = got.indexOf("\r\n");
      if (head > 0 && got.length >= head + 2 + Number(got.slice(1, head)) + 2) resolve(got);
    });
    socket.on("error", reject);
    socket.write("*2\r\n$4\r\nINFO\r\n$6\r\nmemory\r\n");
  });
  socket.end();
  const m = /used_memory:(\d+)/.exec(text);
  if (!m) throw new Error("INFO memory has no used_memory");
  return Number(m[1]);
}
