// The metrics of a node, as OpenTelemetry instruments on a Meter. Almost all are observable: they
// read counters the store, the anti-entropy engine, its transport and membership keep anyway, at
// collection time (a Prometheus scrape), so the hot paths carry no telemetry code. Only the client
// API's calls are recorded as they happen (through the Replica service's onCall hook).
// Per-partition figures are exported as sums and maxima, not one series per partition.
// Only types are imported here (no SDK, and no grpc-js: bin/deltaset.mjs loads this file before
// the gRPC instrumentation is in place).
import type { Attributes, BatchObservableResult, Meter, Observable } from "@opentelemetry/api";
import type { NodeGossip } from "../gossip/node-gossip.js";
import type { MembershipDriver } from "../membership/driver.js";
import type { Store } from "../store/store.js";
import type { Refusal } from "./auth.js";

/** gRPC status names, indexed by code (label values a person can read). */
const STATUS_NAMES = [
  "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
  "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
  "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
];

/** grpc-js's status.OK, named here (grpc-js is not imported, see above). */
const STATUS_OK = 0;

export function statusName(code: number): string {
  return STATUS_NAMES[code] ?? String(code);
}

/** MemberState names by value (deltaset.v1.MemberState), lower-cased for labels. */
const MEMBER_STATES = ["unspecified", "alive", "suspect", "dead", "left"];

/** Latency buckets in seconds: 100 µs to 10 s. */
const LATENCY_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export interface RpcRecorder {
  /** The Replica service's onCall hook. */
  onCall(method: string, code: number, ms: number): void;
  /** Calls refused before any handler (missing token or peer certificate). */
  onRefused(service: string, reason: Refusal): void;
  /** A TLS handshake with this node failed (reason: OpenSSL's code). */
  onTlsHandshakeFailure(reason: string): void;
  /** A call this node made to an owner of a key it does not own ended (outcome: ok, error, failover). */
  onForwarded(method: string, outcome: string): void;
}

/** Client API calls: count by method and status, errors, and a latency histogram. */
export function rpcMetrics(meter: Meter): RpcRecorder {
  const calls = meter.createCounter("deltaset_rpc_calls", { description: "Client API calls by method and gRPC status" });
  const errors = meter.createCounter("deltaset_rpc_errors", { description: "Client API calls that ended with a status other than OK" });
  const latency = meter.createHistogram("deltaset_rpc_duration_seconds", {
    description: "Client API call duration, by method",
    unit: "s",
    advice: { explicitBucketBoundaries: LATENCY_BUCKETS },
  });
  const refused = meter.createCounter("deltaset_auth_refused", { description: "Calls refused for lack of a valid token or peer certificate" });
  const handshakes = meter.createCounter("deltaset_tls_handshake_failures", { description: "Incoming TLS handshakes that failed, by OpenSSL reason" });
  const forwarded = meter.createCounter("deltaset_forwarded_calls", {
    description: "Calls this node made to an owner of a key it does not own (--replication-factor R), by method and outcome: ok, error, or failover (UNAVAILABLE, the next owner was tried)",
  });
  // Attribute objects are reused: one per method/status seen, not one per call.
  const attrs = new Map<string, Attributes>();
  const attrsOf = (method: string, code: number): Attributes => {
    const k = `${method}\u0000${code}`;
    let a = attrs.get(k);
    if (a === undefined) attrs.set(k, (a = { method, status: statusName(code) }));
    return a;
  };
  const methodAttrs = new Map<string, Attributes>();
  const forwardAttrs = new Map<string, Attributes>();
  return {
    onCall(method, code, ms) {
      const a = attrsOf(method, code);
      calls.add(1, a);
      if (code !== STATUS_OK) errors.add(1, a);
      let m = methodAttrs.get(method);
      if (m === undefined) methodAttrs.set(method, (m = { method }));
      latency.record(ms / 1000, m);
    },
    onRefused(service, reason) {
      refused.add(1, { service, reason });
    },
    onTlsHandshakeFailure(reason) {
      handshakes.add(1, { reason });
    },
    onForwarded(method, outcome) {
      const k = `${method}\u0000${outcome}`;
      let a = forwardAttrs.get(k);
      if (a === undefined) forwardAttrs.set(k, (a = { method, outcome }));
      forwarded.add(1, a);
    },
  };
}

/** Seconds until the node's TLS certificate expires (negative once expired; absent without TLS). */
export function certificateMetrics(meter: Meter, secondsLeft: () => number | undefined): void {
  meter
    .createObservableGauge("deltaset_tls_certificate_expiry_seconds", { description: "Seconds until the node's TLS certificate expires (negative: expired)", unit: "s" })
    .addCallback((r) => {
      const left = secondsLeft();
      if (left !== undefined) r.observe(left);
    });
}

/** The store: data size on disk (LevelDB's estimate) and group-commit counters. */
export function storeMetrics(meter: Meter, store: Store): void {
  meter
    .createObservableGauge("deltaset_store_data_bytes", { description: "Approximate bytes of replicated data on disk (LevelDB estimate)", unit: "By" })
    .addCallback(async (r) => {
      try {
        r.observe(await store.approximateDataBytes());
      } catch {
        // The store is closing: report nothing for this collection.
      }
    });
  const batches = meter.createObservableCounter("deltaset_store_commit_batches", { description: "Group commits written to LevelDB" });
  const writes = meter.createObservableCounter("deltaset_store_writes", { description: "Operations written through group commit" });
  const headers = meter.createObservableGauge("deltaset_store_cached_headers", { description: "Object headers held in memory" });
  const pendingRemoves = meter.createObservableGauge("deltaset_pending_removes", {
    description: "Elements whose Remove waits for adds its context covers that have not arrived here yet",
  });
  const pendingRemoveBytes = meter.createObservableGauge("deltaset_pending_remove_bytes", {
    description: "Bytes of the deferred removes kept here (key, element and the context each waits for; bounded by --max-pending-remove-bytes)",
  });
  const refusedJoins = meter.createObservableCounter("deltaset_counter_joins_refused", {
    description: "Counter joins (Merge, gossip, and gossip's later tries of a join it refused) refused because the result would leave int64",
  });
  const retriesAbsorbed = meter.createObservableCounter("deltaset_counter_retries_absorbed", {
    description: "Increments with a request_id recognised as retries and acknowledged without being applied again",
  });
  // Its own metric, not an attribute of the counters' one: that name and its series stay as they were.
  const filterRetriesAbsorbed = meter.createObservableCounter("deltaset_filter_retries_absorbed", {
    description: "Adds to filter keys (GBF, GCF, ORCF, SC*) with a request_id recognised as retries and acknowledged without being applied again",
  });
  const skewReports = meter.createObservableCounter("deltaset_clock_skew_reports", {
    description: "Received retry filters (of counters and filter keys) whose epochs put the sender's clock further than --max-clock-skew-ms from this node's (direction: ahead or behind)",
  });
  const stateCacheReads = meter.createObservableCounter("deltaset_state_cache_reads", {
    description: "Reads of a key stored whole (filters, counters, probabilistic sets) by whether its decoded state was in memory (result: hit or miss; --state-cache-bytes)",
  });
  const stateCacheBytes = meter.createObservableGauge("deltaset_state_cache_bytes", {
    description: "Memory the decoded states held take, as estimated from their encoded size (--state-cache-bytes)",
    unit: "By",
  });
  const stateLog = meter.createObservableCounter("deltaset_state_log_writes", {
    description: "Writes of large filter states kept as a base and a log of deltas (kind: append, a delta record; compaction, a new base replacing the deltas)",
  });
  const presenceSkipped = meter.createObservableCounter("deltaset_element_reads_skipped", {
    description: "Element records of add-wins sets not read because the set's presence filter knew they did not exist (--presence-filter-bytes)",
  });
  const presenceBytes = meter.createObservableGauge("deltaset_presence_filter_bytes", {
    description: "Memory the presence filters of add-wins sets take (--presence-filter-bytes)",
    unit: "By",
  });
  const expired = meter.createObservableCounter("deltaset_expired_adds", {
    description: "Adds (dots) of sets removed from storage because their time to live ran out",
  });
  meter.addBatchObservableCallback(
    (r) => {
      const s = store.stats();
      r.observe(expired, s.expiredDots);
      r.observe(retriesAbsorbed, s.retriesAbsorbed);
      r.observe(filterRetriesAbsorbed, s.filterRetriesAbsorbed);
      r.observe(skewReports, s.clockSkewReports.ahead, { direction: "ahead" });
      r.observe(skewReports, s.clockSkewReports.behind, { direction: "behind" });
      r.observe(batches, s.batches);
      r.observe(writes, s.writes);
      r.observe(headers, s.cachedHeaders);
      r.observe(refusedJoins, s.counterJoinsRefused);
      r.observe(pendingRemoves, s.pendingRemoves);
      r.observe(pendingRemoveBytes, s.pendingRemoveBytes);
      r.observe(stateCacheReads, s.stateCache.hits, { result: "hit" });
      r.observe(stateCacheReads, s.stateCache.misses, { result: "miss" });
      r.observe(stateCacheBytes, s.stateCache.estimatedBytes);
      r.observe(stateLog, s.stateLog.appends, { kind: "append" });
      r.observe(stateLog, s.stateLog.compactions, { kind: "compaction" });
      r.observe(presenceSkipped, s.presence.skipped);
      r.observe(presenceBytes, s.presence.bytes);
    },
    [batches, writes, headers, refusedJoins, pendingRemoves, pendingRemoveBytes, retriesAbsorbed, filterRetriesAbsorbed, skewReports, expired, stateCacheReads, stateCacheBytes, stateLog, presenceSkipped, presenceBytes],
  );
}

export interface ClusterSources {
  gossip: NodeGossip;
  membership: MembershipDriver;
}

const KINDS = ["delta", "state"] as const;
const KINDS_ACK = ["delta", "state", "ack"] as const;
const KIND_ATTRS = { delta: { kind: "delta" }, state: { kind: "state" }, ack: { kind: "ack" } };

const EVENT_ATTRS = new Map<string, Attributes>();
/** framesRejected → { event: "frames_rejected" } (Prometheus label values are snake_case). */
function eventAttrs(name: string): Attributes {
  let a = EVENT_ATTRS.get(name);
  if (a === undefined) EVENT_ATTRS.set(name, (a = { event: name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`) }));
  return a;
}

/**
 * Anti-entropy and membership, read from the parts once they exist (getSources returns undefined
 * until the node's background parts have started).
 */
export function clusterMetrics(meter: Meter, getSources: () => ClusterSources | undefined): void {
  const counter = (name: string, description: string, unit?: string) => meter.createObservableCounter(name, { description, unit });
  const gauge = (name: string, description: string, unit?: string) => meter.createObservableGauge(name, { description, unit });

  const bytesSent = counter("deltaset_gossip_sent_bytes", "Anti-entropy payload bytes sent, by kind (delta, state, ack)", "By");
  const bytesReceived = counter("deltaset_gossip_received_bytes", "Anti-entropy payload bytes received, by kind (delta, state, ack)", "By");
  const itemsSent = counter("deltaset_gossip_sent_payloads", "Partition payloads sent, by kind (delta, state; ack: acks sent)");
  const itemsReceived = counter("deltaset_gossip_received_payloads", "Partition payloads received, by kind (delta, state; ack: acks received)");
  const framesSent = counter("deltaset_gossip_sent_frames", "Anti-entropy frames sent");
  const framesReceived = counter("deltaset_gossip_received_frames", "Anti-entropy frames received");
  const ticks = counter("deltaset_gossip_rounds", "Anti-entropy rounds run");
  const fallbacks = counter("deltaset_gossip_state_fallbacks", "Full states shipped because the delta buffer no longer held what a neighbour lacked");
  const redundant = counter("deltaset_gossip_redundant_payloads", "Received payloads that brought nothing new");
  const overflow = counter("deltaset_gossip_buffer_overflow_drops", "Deltas dropped because a partition's buffer exceeded its byte budget");
  const collected = counter("deltaset_gossip_deltas_collected", "Buffered deltas garbage-collected after every neighbour acked them");
  const transport = counter("deltaset_gossip_transport_events", "Transport events: rejected frames and chunks, RPC errors, type conflicts, skipped busy peers, state streams");
  const bufferBytes = gauge("deltaset_gossip_buffer_bytes", "Bytes in the delta buffers, summed over partitions", "By");
  const bufferBytesMax = gauge("deltaset_gossip_buffer_bytes_max", "Bytes in the largest partition delta buffer", "By");
  const bufferEntries = gauge("deltaset_gossip_buffer_entries", "Deltas in the buffers, summed over partitions");
  const lagMax = gauge("deltaset_gossip_lag_max", "Largest per-partition lag: local sequence numbers the slowest neighbour has not acked");
  const lagSum = gauge("deltaset_gossip_lag_sum", "Per-partition lag (slowest neighbour) summed over partitions");
  const lagging = gauge("deltaset_gossip_lagging_partitions", "Partitions some neighbour has not fully acked");
  const unackedAge = gauge(
    "deltaset_gossip_oldest_unacked_seconds",
    "How long ago the oldest change some neighbour has not acknowledged was taken here (at most; 0 when all is acked; +Inf when unknown: changes from before a restart not yet acknowledged, or held while the node has no neighbour): every older change is on every live neighbour that exchanges its partition. Absent under Algorithm 1",
    "s",
  );
  const neighbours = gauge("deltaset_gossip_neighbours", "Anti-entropy neighbours (live members)");
  const members = gauge("deltaset_members", "Members in this node's view, by state");
  const probeRtt = gauge("deltaset_membership_probe_rtt_ms", "Round trips of this node's recent direct probes (last 64), by stat: p50, p95, max; and the probe timeout (stat=\"timeout\"). Keep the timeout at about twice the p95");
  const identity = counter("deltaset_membership_identity_contests", "Another live process claimed this node's id (two nodes with one id, or a copied data directory): each time, this node draws a new replica id and logs an error");
  const refusedAsPeer = gauge(
    "deltaset_membership_refused_as_peer",
    "1 while this node, alone, is refused UNAUTHENTICATED by the seeds that answer its join (a cluster key or certificate the cluster does not hold) and so answers no client call; else 0",
  );
  const copiesWaiting = gauge(
    "deltaset_writes_waiting_for_copies",
    "Client writes (Add, Remove, Increment, Delete, Merge, Import and AddStream batches asking for copies) made here and waiting for other nodes to acknowledge that they hold them durably",
  );
  const handOff = counter("deltaset_handoff_events", "Hand-off of partitions this node holds without owning them (--replication-factor R): partitions, keys and bytes dropped after their owners acknowledged them, keys kept for deferred removes");

  const observables: Observable[] = [
    bytesSent, bytesReceived, itemsSent, itemsReceived, framesSent, framesReceived, ticks, fallbacks, redundant, overflow,
    collected, transport, bufferBytes, bufferBytesMax, bufferEntries, lagMax, lagSum, lagging, unackedAge, neighbours, members, handOff, probeRtt, identity,
    refusedAsPeer, copiesWaiting,
  ];
  meter.addBatchObservableCallback((r: BatchObservableResult) => {
    const src = getSources();
    if (src === undefined) return;
    // The engine may be replaced at start (restored sequence numbers): read it now, not earlier.
    const snap = src.gossip.engine.snapshot();
    const c = snap.counters;
    for (const k of KINDS_ACK) {
      r.observe(bytesSent, c.bytesSent[k], KIND_ATTRS[k]);
      r.observe(bytesReceived, c.bytesReceived[k], KIND_ATTRS[k]);
    }
    for (const k of KINDS) {
      r.observe(itemsSent, c.itemsSent[k], KIND_ATTRS[k]);
      r.observe(itemsReceived, c.itemsReceived[k], KIND_ATTRS[k]);
    }
    r.observe(itemsSent, c.acksSent, KIND_ATTRS.ack);
    r.observe(itemsReceived, c.acksReceived, KIND_ATTRS.ack);
    r.observe(framesSent, c.framesSent);
    r.observe(framesReceived, c.framesReceived);
    r.observe(ticks, c.ticks);
    r.observe(fallbacks, c.stateFallbacks);
    r.observe(redundant, c.redundantReceived);
    r.observe(overflow, c.bufferOverflowDrops);
    r.observe(collected, c.deltasCollected);
    for (const [event, n] of Object.entries(src.gossip.counters)) r.observe(transport, n, eventAttrs(event));
    // Engine events that matter to an operator beside the transport's: large received catch-ups
    // forwarded by full state, peers whose acks were reset after they restarted, partitions
    // whose acks were reset after their peer said it dropped them (hand-off), and writes'
    // intervals pushed alone to a neighbour catching up so that it confirms their copies.
    r.observe(transport, c.largeCatchUps, eventAttrs("largeCatchUps"));
    r.observe(transport, c.peerRestarts, eventAttrs("peerRestarts"));
    r.observe(transport, c.peerDrops, eventAttrs("peerDrops"));
    r.observe(transport, c.copyRanges, eventAttrs("copyRanges"));
    for (const [event, n] of Object.entries(src.gossip.handOffCounters ?? {})) r.observe(handOff, n, eventAttrs(event));
    let bytes = 0;
    let maxBytes = 0;
    let entries = 0;
    let maxLag = 0;
    let sumLag = 0;
    let behind = 0;
    for (const p of snap.partitions) {
      bytes += p.bufferBytes;
      maxBytes = Math.max(maxBytes, p.bufferBytes);
      entries += p.bufferEntries;
      maxLag = Math.max(maxLag, p.lag);
      sumLag += p.lag;
      if (p.lag > 0) behind++;
    }
    r.observe(bufferBytes, bytes);
    r.observe(bufferBytesMax, maxBytes);
    r.observe(bufferEntries, entries);
    r.observe(lagMax, maxLag);
    r.observe(lagSum, sumLag);
    r.observe(lagging, behind);
    // Not under Algorithm 1, which has no acknowledgements: a 0 would read as "all shipped".
    const oldestMs = src.gossip.oldestUnackedMs();
    if (oldestMs !== undefined) r.observe(unackedAge, oldestMs / 1000);
    r.observe(neighbours, snap.neighbours.length);
    const byState = new Map<string, number>(MEMBER_STATES.slice(1).map((s) => [s, 0]));
    for (const m of src.membership.members({ includeDeparted: true })) {
      const s = MEMBER_STATES[m.state] ?? String(m.state);
      byState.set(s, (byState.get(s) ?? 0) + 1);
    }
    for (const [state, n] of byState) r.observe(members, n, { state });
    r.observe(identity, src.membership.stats().identityContests);
    r.observe(refusedAsPeer, src.membership.peerRefusal === undefined ? 0 : 1);
    r.observe(copiesWaiting, src.gossip.copiesWaiting);
    const rtt = src.membership.probeTimingStats();
    r.observe(probeRtt, rtt.timeoutMs, { stat: "timeout" });
    if (rtt.samples > 0) {
      r.observe(probeRtt, rtt.p50Ms!, { stat: "p50" });
      r.observe(probeRtt, rtt.p95Ms!, { stat: "p95" });
      r.observe(probeRtt, rtt.maxMs!, { stat: "max" });
    }
  }, observables);
}
