// `deltaset node`: run one node until SIGTERM or SIGINT, then drain and exit 0. SIGHUP reloads
// credentials (tokens, cluster keys, certificates) and keeps the node running. --help lists every
// setting (generated from the tables in node/settings.ts).
import { parseArgs } from "node:util";
import { ConfigError, configFlags, describeConfig, loadConfig, withBoolValues } from "../node/config.js";
import { nodeHelp } from "../node/config-docs.js";
import { createLogger } from "../common/logger.js";
import { nodeExtensions } from "../node/cluster-wiring.js";
import { routeForeignLogs } from "../node/foreign-logs.js";
import { SettingsRefusedError, startNode } from "../node/node.js";
import { StoreOpenError, StoreWriteError } from "../store/store.js";

/** After a fatal storage failure the process exits at the latest this long after the drain timeout (a stop that hangs on the failed storage must not keep it up). */
const FATAL_STOP_MARGIN_MS = 5_000;

export async function nodeCommand(args: string[]): Promise<void> {
  const { values } = parseArgs({ args: withBoolValues(args), options: { ...configFlags(), help: { type: "boolean", short: "h" } }, allowPositionals: false, strict: true });
  if (values.help === true) {
    process.stdout.write(nodeHelp());
    return;
  }
  let config;
  try {
    config = loadConfig(values as Record<string, string | undefined>);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`deltaset node: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const log = createLogger(config.logLevel);
  routeForeignLogs(log);
  log.info("configuration", { config: describeConfig(config) });
  let node: Awaited<ReturnType<typeof startNode>> | undefined;
  // SIGHUP rereads tokens, cluster keys and certificates; it never stops the node (installed
  // first: the default action of SIGHUP is to terminate, even while the node starts).
  process.on("SIGHUP", () => {
    try {
      if (node === undefined) log.warn("SIGHUP while starting: nothing to reload yet");
      else node.reload("SIGHUP");
    } catch (err) {
      log.error("reload failed", { err });
    }
  });
  try {
    node = await startNode(config, log, nodeExtensions(config), {
      onFatal: (reason, stopped) => {
        process.stderr.write(`deltaset node: ${reason}; stopping, exit 1 (restart the node: it recovers from its data directory)\n`);
        setTimeout(() => process.exit(1), config.drainTimeoutMs + FATAL_STOP_MARGIN_MS);
        void stopped.finally(() => process.exit(1));
      },
      // A setting that differs from the cluster's is a bad setting: exit 2, as for one refused at parsing.
      onSettingsRefused: (reason, stopped) => {
        process.stderr.write(`deltaset node: the cluster refused this node's settings: ${reason}; stopping, exit 2\n`);
        setTimeout(() => process.exit(2), config.drainTimeoutMs + FATAL_STOP_MARGIN_MS);
        void stopped.finally(() => process.exit(2));
      },
    });
  } catch (err) {
    if (err instanceof SettingsRefusedError) {
      process.stderr.write(`deltaset node: the cluster refused this node's settings: ${err.message}\n`);
      process.exit(2);
    }
    // ConfigError here: unreadable certificates, token file or metrics address.
    // StoreWriteError: the storage refused a write while the node started (a full disk).
    if (err instanceof StoreOpenError || err instanceof ConfigError || err instanceof StoreWriteError) {
      log.error("cannot start", { reason: err.message });
      process.stderr.write(`deltaset node: ${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  const running = node;
  let stopping = false;
  const onSignal = (sig: string) => {
    // A second SIGTERM or SIGINT (an impatient supervisor, Ctrl-C twice) does not cut the drain
    // and the leave short: the node stops once, cleanly; SIGKILL stops it at once.
    if (stopping) {
      log.info("already stopping: draining and leaving the cluster (SIGKILL stops at once, without leaving)", { signal: sig });
      return;
    }
    stopping = true;
    void running.stop(`received ${sig}`).then(
      () => process.exit(0),
      (err) => {
        log.error("shutdown failed", { err });
        process.exit(1);
      },
    );
  };
  // Handlers first: a launcher may signal as soon as it reads the line below.
  process.on("SIGTERM", () => onSignal("SIGTERM"));
  process.on("SIGINT", () => onSignal("SIGINT"));
  // Machine-readable line for launchers and tests.
  process.stdout.write(JSON.stringify({ event: "listening", nodeId: node.nodeId, address: node.address, metrics: node.metricsAddress }) + "\n");
}
