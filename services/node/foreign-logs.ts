// The node's stderr is one JSON object per line (common/logger.ts), but two writers inside the
// process print plain text there by default: grpc-js ("E 2026-... | v1.14.7 ... | subchannel ...")
// and Node itself (a process warning such as "(node:42) [DEP0123] DeprecationWarning: ..."). A
// log pipeline that parses each line as JSON drops those or stops on them. This routes both
// through the node's logger, with a `source` field saying whose line it is.
import { format } from "node:util";
import * as grpc from "@grpc/grpc-js";
import type { Logger } from "../common/logger.js";

/** Route grpc-js's log lines and Node's process warnings through `log` from now on. */
export function routeForeignLogs(log: Logger): void {
  const fromGrpc = log.child({ source: "grpc-js" });
  grpc.setLogger({
    error: (...args: unknown[]) => fromGrpc.error(format(...args)),
    info: (...args: unknown[]) => fromGrpc.info(format(...args)),
    debug: (...args: unknown[]) => fromGrpc.debug(format(...args)),
  });
  // Node prints a warning through its own listener, installed at start-up; without it, a listener
  // added here is the only one (the process still emits every warning).
  process.removeAllListeners("warning");
  process.on("warning", (w: Error & { code?: string }) => log.warn(w.message, { source: "node", warning: w.name, ...(w.code !== undefined ? { code: w.code } : {}) }));
}
