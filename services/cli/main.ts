// The `deltaset` command.
import { commandHelp } from "./command-help.js";
import {
  HelpRequested,
  UsageError,
  addCommand,
  deleteCommand,
  keysCommand,
  incrCommand,
  membersCommand,
  ownersCommand,
  queryCommand,
  removeCommand,
  scanCommand,
} from "./client-commands.js";
import { nodeCommand } from "./node-command.js";
import { exportCommand, importCommand, watchCommand } from "./transfer-commands.js";
import { connectionFailureReason } from "../common/connection-error.js";

const HELP = `deltaset: replicated add-wins sets and counters over gRPC

usage: deltaset <command> [options]

  node      run a node                      deltaset node --listen 127.0.0.1:7070 --data-dir .deltaset/data
  cluster   run a local cluster of N nodes  deltaset cluster --nodes 3
  add       add elements to a set           deltaset add KEY ELEMENT... [--addr HOST:PORT]
            or stream them, one per line    deltaset add KEY --stdin [--batch N] < elements.txt
  remove    remove elements from a set      deltaset remove KEY ELEMENT...
  query     membership, or a page of members and the context
                                            deltaset query KEY [ELEMENT...] [--all]
  scan      stream every member             deltaset scan KEY [--count]
  incr      add to a counter                deltaset incr KEY AMOUNT
  export    a key's state (or its delta since a context) as a binary stream on stdout
                                            deltaset export KEY [--since-file F] [--next-since-file G] > FILE
  import    apply an export stream from stdin to a key (admin scope)
                                            deltaset export s --addr A | deltaset import s --addr B
  keys      the keys a node holds           deltaset keys [--prefix P] [--all]
  compare   the sets that differ between nodes (exit 1 while any does)
                                            deltaset compare HOST:PORT HOST:PORT... [--prefix P] [--quiet]
  delete    remove every element of a set   deltaset delete KEY
  watch     follow a key's changes          deltaset watch KEY [--since-file F] | deltaset watch --prefix P
  members   the cluster membership view     deltaset members [--all]
  owners    the nodes that own a key        deltaset owners KEY
  chaos     fault experiments               deltaset chaos run SCENARIO | deltaset chaos proxy
  verify    check a stopped node's data     deltaset verify --data-dir .deltaset/data [KEY...]

Client commands take --addr (default $DELTASET_ADDR or 127.0.0.1:7070), --json, --hex (elements in and out as hex),
and for secured nodes --tls-ca FILE ($DELTASET_TLS_CA) and a token: --token-file FILE ($DELTASET_TOKEN_FILE)
or $DELTASET_TOKEN (preferred: --token T is visible to other users in the process list).
Every node setting, with its default and environment variable: deltaset node --help.
`;

const commands: Record<string, (args: string[]) => Promise<void>> = {
  node: nodeCommand,
  add: addCommand,
  keys: keysCommand,
  delete: deleteCommand,
  watch: watchCommand,
  remove: removeCommand,
  query: queryCommand,
  scan: scanCommand,
  incr: incrCommand,
  members: membersCommand,
  owners: ownersCommand,
  export: exportCommand,
  import: importCommand,
  cluster: async (args) => (await import("./cluster-command.js")).clusterCommand(args),
  chaos: async (args) => (await import("./chaos-command.js")).chaosCommand(args),
  verify: async (args) => (await import("./verify-command.js")).verifyCommand(args),
  compare: async (args) => (await import("./compare-command.js")).compareCommand(args),
};

export async function main(argv: string[]): Promise<void> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "help" || name === "--help" || name === "-h") {
    process.stdout.write(HELP);
    return;
  }
  const cmd = commands[name];
  // The reader of this command's output went away (deltaset export | deltaset import, the import
  // refused): one line, exit 1, instead of an uncaught EPIPE. The node runs its own process.
  if (name !== "node") {
    process.stdout.on("error", (err: NodeJS.ErrnoException) => {
      if (err.code !== "EPIPE") throw err;
      process.stderr.write(`deltaset ${name}: stopped: the command reading its output closed it\n`);
      process.exit(1);
    });
  }
  if (cmd === undefined) {
    process.stderr.write(`deltaset: unknown command "${name}"\n\n${HELP}`);
    process.exit(2);
  }
  try {
    await cmd(rest);
  } catch (err) {
    if (err instanceof HelpRequested) {
      process.stdout.write(commandHelp(name, HELP, err.options));
      return;
    }
    const e = err as { code?: number; details?: string; message?: string };
    if (err instanceof UsageError || (err as Error).name === "TypeError" && /ERR_PARSE_ARGS/.test(String((err as { code?: string }).code))) {
      process.stderr.write(`deltaset ${name}: ${e.message}\n`);
      process.exit(2);
    }
    if (typeof e.code === "number" && e.details !== undefined) {
      process.stderr.write(`deltaset ${name}: ${unreachable(e.code, e.details, rest) ?? e.details} (gRPC status ${e.code})\n`);
      process.exit(1);
    }
    throw err;
  }
}

/**
 * A call that found no node (UNAVAILABLE before any connection): which address was tried, why,
 * and how to name another, instead of grpc-js's "No connection established. Last error: ...".
 */
function unreachable(code: number, details: string, args: string[]): string | undefined {
  if (code !== 14 || !details.startsWith("No connection established")) return undefined;
  const given = addrOption(args);
  const addr = given ?? process.env.DELTASET_ADDR ?? "127.0.0.1:7070";
  const why = connectionFailureReason(details);
  const hint = given === undefined ? "; name the node with --addr HOST:PORT or $DELTASET_ADDR" : "";
  return `no node answers at ${addr} (${why})${hint}`;
}

/** The --addr the command line gives (the last one, before any '--'), as the parser reads it. */
function addrOption(args: string[]): string | undefined {
  const end = args.indexOf("--");
  const options = end >= 0 ? args.slice(0, end) : args;
  let addr: string | undefined;
  for (let i = 0; i < options.length; i++) {
    if (options[i] === "--addr") addr = options[++i];
    else if (options[i]!.startsWith("--addr=")) addr = options[i]!.slice(7);
  }
  return addr;
}
