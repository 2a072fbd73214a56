// The background parts of a node (anti-entropy, membership, telemetry), chosen by configuration.
import type { NodeConfig } from "./config.js";
import type { NodeContext, NodeExtension } from "./node.js";

export function nodeExtensions(_config: NodeConfig): Array<(ctx: NodeContext) => NodeExtension> {
  return [];
}
