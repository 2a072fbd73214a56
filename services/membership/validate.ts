// Checks on every message that comes from the network, before the core trusts any field of it.
// Each check returns a Refusal (INVALID_ARGUMENT for a malformed message, FAILED_PRECONDITION for
// a message of a node whose cluster name, partitions or replication factor differ) or undefined
// when the message is fine.
import { MemberState, type MemberInfo } from "../gen/deltaset/v1/membership.js";
import type { ClusterSetting, ClusterSettings, Refusal } from "./types.js";

export const MAX_NODE_ID_LENGTH = 256;
export const MAX_ADDRESS_LENGTH = 512;
export const MAX_CLUSTER_LENGTH = 256;
const MAX_UINT64 = (1n << 64n) - 1n;

// host:port with a DNS name, IPv4 or bracketed IPv6 host.
const ADDRESS = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?):(\d{1,5})$/;

function invalid(message: string): Refusal {
  return { code: "INVALID_ARGUMENT", message };
}

/** Short, printable rendering of an untrusted string for an error message. */
export function quote(value: string): string {
  const shown = value.length > 64 ? `${value.slice(0, 64)}...` : value;
  return JSON.stringify(shown);
}

export function isValidAddress(address: string): boolean {
  if (typeof address !== "string" || address.length === 0 || address.length > MAX_ADDRESS_LENGTH) return false;
  const match = ADDRESS.exec(address);
  if (!match) return false;
  const port = Number(match[1]);
  return port > 0 && port <= 65535;
}

export function checkName(value: unknown, field: string, maxLength: number): Refusal | undefined {
  if (typeof value !== "string" || value.length === 0) return invalid(`${field} is required`);
  if (value.length > maxLength) return invalid(`${field} is longer than ${maxLength} characters`);
  // Control characters in ids end up in logs and metrics labels.
  if (/[\u0000-\u001f\u007f]/.test(value)) return invalid(`${field} contains control characters`);
  return undefined;
}

/** A message's cluster name is well formed (whose it is: checkSameCluster). */
export function checkCluster(cluster: unknown): Refusal | undefined {
  return checkName(cluster, "cluster", MAX_CLUSTER_LENGTH);
}

/** A cluster-wide setting that differs, naming both nodes and values so it reads the same in either node's log. */
function settingDiffers(flag: ClusterSetting, caller: string, their: string, self: string, mine: string): Refusal {
  return {
    code: "FAILED_PRECONDITION",
    setting: flag,
    message: `--${flag} differs: ${caller} runs with --${flag} ${their} but ${self} with --${flag} ${mine}; every node of a cluster needs the same --${flag}`,
  };
}

/**
 * The caller's cluster name (checked by checkCluster) against this node's: another name is refused
 * as a setting that differs. Names are not secret (every peer message carries one in the clear,
 * and with a cluster key only key holders get this far), so the refusal shows both.
 */
export function checkSameCluster(theirs: string, own: string, caller: string, self: string): Refusal | undefined {
  return theirs === own ? undefined : settingDiffers("cluster", caller, quote(theirs), self, quote(own));
}

/** A replication factor as the flag spells it (0 on the wire is "all"). */
export function factorText(r: number): string {
  return r === 0 ? "all" : String(r);
}

/**
 * The caller's cluster-wide settings against this node's. A field the caller does not send (a node
 * of an earlier version) is not checked, nor is anything when this node has no settings to compare.
 * The message names both nodes and values, so that it reads the same in either node's log.
 */
export function checkSettings(
  theirs: { partitions?: number | undefined; replicationFactor?: number | undefined },
  own: ClusterSettings | undefined,
  caller: string,
  self: string,
): Refusal | undefined {
  if (own === undefined) return undefined;
  const differs = (flag: ClusterSetting, their: string, mine: string) => settingDiffers(flag, caller, their, self, mine);
  if (theirs.partitions !== undefined && theirs.partitions !== own.partitions) {
    return differs("partitions", String(theirs.partitions), String(own.partitions));
  }
  if (theirs.replicationFactor !== undefined && theirs.replicationFactor !== own.replicationFactor) {
    return differs("replication-factor", factorText(theirs.replicationFactor), factorText(own.replicationFactor));
  }
  return undefined;
}

export function checkNodeId(value: unknown, field: string): Refusal | undefined {
  return checkName(value, field, MAX_NODE_ID_LENGTH);
}

export function checkAddress(value: unknown, field: string): Refusal | undefined {
  if (typeof value !== "string" || !isValidAddress(value)) {
    return invalid(`${field} must be host:port, got ${quote(String(value))}`);
  }
  return undefined;
}

export function checkIncarnation(value: unknown, field: string): Refusal | undefined {
  if (typeof value !== "bigint" || value < 0n || value > MAX_UINT64) return invalid(`${field} must be a uint64`);
  return undefined;
}

export function checkMember(info: MemberInfo | undefined, field: string): Refusal | undefined {
  if (info === undefined || info === null || typeof info !== "object") return invalid(`${field} is required`);
  const state = info.state;
  if (
    state !== MemberState.ALIVE && state !== MemberState.SUSPECT &&
    state !== MemberState.DEAD && state !== MemberState.LEFT
  ) {
    return invalid(`${field}.state must be ALIVE, SUSPECT, DEAD or LEFT`);
  }
  return (
    checkNodeId(info.nodeId, `${field}.node_id`) ??
    checkAddress(info.address, `${field}.address`) ??
    checkIncarnation(info.incarnation, `${field}.incarnation`)
  );
}

export function checkMembers(list: readonly MemberInfo[] | undefined, field: string, max: number): Refusal | undefined {
  if (list === undefined) return undefined;
  if (!Array.isArray(list)) return invalid(`${field} must be a list`);
  if (list.length > max) return invalid(`${field} holds ${list.length} entries, more than the limit ${max}`);
  for (let i = 0; i < list.length; i++) {
    const bad = checkMember(list[i], `${field}[${i}]`);
    if (bad) return bad;
  }
  return undefined;
}
