// `deltaset verify --data-dir DIR [KEY...]`: check a stopped node's data directory offline. For
// every set (or the given keys) the element records, the dot index and the header must agree, and
// every counter must be within int64; see Store.verify. Exit status 0 when everything agrees, 1 when a problem was found.
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { ObjectType } from "../crdt/index.js";
import { partitionOf } from "../gossip/partition.js";
import { Store, StoreOpenError } from "../store/store.js";
import { HelpRequested, UsageError, wantsHelp } from "./client-commands.js";
import { bar, createOutput } from "./output.js";

export async function verifyCommand(args: string[]): Promise<void> {
  const options = { "data-dir": { type: "string" }, json: { type: "boolean", default: false } } as const;
  if (wantsHelp(args)) throw new HelpRequested(options);
  const { values, positionals } = parseArgs({
    args,
    options,
    allowPositionals: true,
    strict: true,
  });
  const dir = values["data-dir"];
  if (dir === undefined) throw new UsageError("deltaset verify --data-dir DIR [KEY...] [--json] (the node must be stopped)");
  const out = createOutput(values.json as boolean);
  // Opening a LevelDB store creates one where there is none: a path without a database is reported
  // as such, untouched.
  if (!existsSync(join(dir, "CURRENT"))) {
    const what = !existsSync(dir)
      ? "does not exist"
      : !statSync(dir).isDirectory()
        ? "is a file, not a directory"
        : readdirSync(dir).length === 0
          ? "is empty"
          : "holds no LevelDB database (no CURRENT file): not a deltaset data directory";
    process.stderr.write(`deltaset verify: ${dir} ${what}\n`);
    process.exit(1);
  }
  // LevelDB writes a new log and manifest when it opens: they get the node's own mode (0600).
  process.umask(0o077);
  let store: Store;
  try {
    // Read-only: an older format is reported, not upgraded.
    store = await Store.open({ dir, partitions: "stored", partitionOf, upgrade: false, keepReplicaId: true });
  } catch (err) {
    if (err instanceof StoreOpenError) {
      const hint = /\bLOCK\b|\block(ed)?\b/.test(err.message) ? " (is a node running on it? stop it first)" : "";
      process.stderr.write(`deltaset verify: ${err.message}${hint}\n`);
      process.exit(1);
    }
    throw err;
  }
  const problems: Array<{ key: string; problem: string }> = [];
  let sets = 0;
  let others = 0;
  let elements = 0;
  try {
    const check = async (key: string) => {
      try {
        const d = await store.describe(key);
        if (d === undefined) {
          problems.push({ key, problem: "no such key" });
          return;
        }
        if (d.type !== ObjectType.AWSET) others++;
        else {
          sets++;
          elements += d.size;
        }
        for (const problem of await store.verify(key)) problems.push({ key, problem });
      } catch (err) {
        // A header that does not decode, or a read LevelDB finds corrupt: a problem of this key.
        problems.push({ key, problem: unreadable(err) });
      }
    };
    if (positionals.length > 0) {
      for (const key of positionals) await check(key);
    } else {
      for (let p = 0; p < store.partitions; p++) {
        out.progress(`${bar(p, store.partitions)} partition ${p}/${store.partitions}, ${sets} set(s), ${elements} element(s)`);
        try {
          for await (const key of store.keys(p)) await check(key);
        } catch (err) {
          // The listing itself hit a corrupt block: the rest of the partition is not read.
          problems.push({ key: `(partition ${p})`, problem: `keys ${unreadable(err)}` });
        }
      }
      out.done();
    }
  } finally {
    await store.close();
  }
  out.result(
    { dir, nodeId: store.nodeId, sets, otherKeys: others, elements, problems },
    [
      `${dir} (node ${store.nodeId}): ${sets} set(s) with ${elements} element(s), ${others} other key(s): ` +
        (problems.length === 0 ? "consistent" : `${problems.length} problem(s)`),
      ...problems.slice(0, 100).map((p) => `  ${p.key}: ${p.problem}`),
      ...(problems.length > 100 ? [`  ... and ${problems.length - 100} more (--json lists all)`] : []),
    ].join("\n"),
  );
  if (problems.length > 0) process.exitCode = 1;
}

/** A read that failed (corrupt data), as a problem line. */
function unreadable(err: unknown): string {
  return `unreadable: ${err instanceof Error ? err.message : String(err)}`;
}
