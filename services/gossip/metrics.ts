// Plain counters kept by the anti-entropy engine. The node's telemetry layer reads them; the
// engine itself depends on no telemetry library.

export interface ByKind {
  delta: number;
  state: number;
}

export interface ByKindWithAck extends ByKind {
  ack: number;
}

export interface GossipCounters {
  /** Periods run (tick calls). */
  ticks: number;
  framesSent: number;
  framesReceived: number;
  /** Partition payloads, by kind. */
  itemsSent: ByKind;
  itemsReceived: ByKind;
  /**
   * Bytes by kind. Delta bytes sent are measured by the engine (ops.sizeBytes); state bytes sent
   * are reported by the caller, which builds the states (recordStateBytesSent); received bytes are
   * what the caller passes with each item; ack bytes are the encoded PartitionAck sizes.
   */
  bytesSent: ByKindWithAck;
  bytesReceived: ByKindWithAck;
  acksSent: number;
  acksReceived: number;
  /** Acks from non-neighbours or beyond the current seq: ignored. */
  acksIgnored: number;
  /** Items for an unknown partition or kind: ignored. */
  itemsRejected: number;
  /** Received payloads that brought nothing new. */
  redundantReceived: number;
  /** Algorithm 2: full state shipped because the buffer no longer held what the neighbour lacked. */
  stateFallbacks: number;
  /** Algorithm 2: deltas dropped because the buffer went over its byte budget. */
  bufferOverflowDrops: number;
  /** Algorithm 2: deltas garbage-collected after every neighbour acked them. */
  deltasCollected: number;
  /** Algorithm 2 with BP: deltas held back from the neighbour they came from. */
  bpHeldBack: number;
  /** Received payloads whose new part was too big to buffer: forwarded by full state. */
  largeCatchUps: number;
  /** Neighbours that came back without what they had acknowledged: their acks were reset. */
  peerRestarts: number;
  /** Partitions whose acks for a peer were reset because the peer said it dropped them. */
  peerDrops: number;
  /** Algorithm 2: intervals of writes waiting for copies pushed alone to a neighbour that needs full state. */
  copyRanges: number;
}

export function newCounters(): GossipCounters {
  return {
    ticks: 0,
    framesSent: 0,
    framesReceived: 0,
    itemsSent: { delta: 0, state: 0 },
    itemsReceived: { delta: 0, state: 0 },
    bytesSent: { delta: 0, state: 0, ack: 0 },
    bytesReceived: { delta: 0, state: 0, ack: 0 },
    acksSent: 0,
    acksReceived: 0,
    acksIgnored: 0,
    itemsRejected: 0,
    redundantReceived: 0,
    stateFallbacks: 0,
    largeCatchUps: 0,
    peerRestarts: 0,
    peerDrops: 0,
    copyRanges: 0,
    bufferOverflowDrops: 0,
    deltasCollected: 0,
    bpHeldBack: 0,
  };
}

export interface PartitionStats {
  partition: number;
  /** Algorithm 2: c. Algorithm 1: 0. */
  seq: number;
  bufferEntries: number;
  bufferBytes: number;
  /** Algorithm 2: max over neighbours of c - A(j). Algorithm 1: 0. */
  lag: number;
  /**
   * Algorithm 2 with a clock: how long ago the oldest change some neighbour has not acknowledged
   * was taken here, at most (0 when every neighbour acked everything).
   */
  unackedAgeMs?: number;
}

export interface EngineSnapshot {
  counters: GossipCounters;
  partitions: PartitionStats[];
  neighbours: string[];
  lastTickAt: number | undefined;
}
