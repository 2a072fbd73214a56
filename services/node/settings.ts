// Every setting of a node, declared once: one table per subsystem, each entry with its flag,
// environment variable, path in NodeConfig (also its key in a JSON config file), kind and
// description. Defaults live in DEFAULT_CONFIG (config.ts) and are read from there by path.
// `deltaset node --help`, docs/configuration.md and the README's table are generated from these
// tables (config-docs.ts; `npm run gen:config`), and test/unit/config-docs.test.ts fails when they drift.

export type SettingKind = "string" | "int" | "bool" | "list" | "fraction";

export interface Setting {
  /** Command-line flag, without the leading dashes. */
  flag: string;
  /** Environment variable. */
  env: string;
  /** Dotted path in NodeConfig; also the key in a JSON config file. */
  path: string;
  kind: SettingKind;
  /** One line, for --help and the tables. Markdown backticks are allowed. */
  description: string;
  /** More explanation, in docs/configuration.md and the README (not in --help). */
  details?: string;
  /** What the value looks like in --help (e.g. HOST:PORT); by default from the kind. */
  value?: string;
  /** Said instead of the value in DEFAULT_CONFIG when that is empty or computed. */
  defaultText?: string;
  /** Shown in --help as a switch, without a value (like every boolean flag, it also takes true/false). */
  bare?: true;
  /** Older names still accepted: flags, environment variables, config file paths. */
  aliases?: { flags?: string[]; envs?: string[]; paths?: string[] };
  /** Listed in the README's short table. */
  readme?: true;
}

export interface SettingGroup {
  /** Short name (a heading in --help and the docs). */
  name: string;
  /** One sentence on what the subsystem does. */
  about: string;
  settings: Setting[];
}

/** The --config flag: not a setting of NodeConfig, but the file the others may come from. */
export const CONFIG_FILE_SETTING: Setting = {
  flag: "config",
  env: "DELTASET_CONFIG",
  path: "",
  kind: "string",
  value: "FILE",
  description: "a JSON file of settings, keyed by their path (e.g. `{\"gossip\": {\"intervalMs\": 500}}`)",
  defaultText: "none",
};

export const NODE_SETTINGS: SettingGroup = {
  name: "node",
  about: "identity, addresses, discovery and shutdown",
  settings: [
    { flag: "listen", env: "DELTASET_LISTEN", path: "listen", kind: "string", value: "HOST:PORT", readme: true, description: "one address for every gRPC service" },
    { flag: "advertise", env: "DELTASET_ADVERTISE", path: "advertise", kind: "string", value: "HOST:PORT", readme: true, defaultText: "the listen address", description: "what peers dial" },
    {
      flag: "node-id", env: "DELTASET_NODE_ID", path: "nodeId", kind: "string", value: "ID", readme: true, defaultText: "generated once, kept in the data dir",
      description: "stable node identity (1-128 characters of A-Z a-z 0-9 . _ -); one live process per id: two (or a copy of a data directory started beside its original) each log an error naming the other, count it in deltaset_membership_identity_contests_total and draw a new replica id",
      details: "Stop one of them. While both run, each greets every peer each gossip period (and for 20 periods, at least 10 s, after the last sign of the other), so a peer that heard last from the other resets what it credited to the id and sends full state: the one that stays ends with the writes acknowledged through the other that reached a peer (checked: 60 adds made through the other, every one on the original within seconds of the other's SIGKILL). A write the stopped one acknowledged and never shipped stays on its disk, as with any node stopped by SIGKILL.",
    },
    { flag: "cluster", env: "DELTASET_CLUSTER", path: "cluster", kind: "string", value: "NAME", description: "cluster name; peers of another cluster are refused. The same on every node: a member refuses the join of a node whose name differs, and that node exits with status 2",
      details: "A node sends the name with every Join, Ping, PingReq and Leave, and a member refuses one whose name differs (FAILED_PRECONDITION naming both names, as for --partitions), so such a node is never listed ALIVE nor placed; refused by a member of a cluster, the node logs why and exits with status 2 (also when it served alone at first because no seed answered). Two nodes in no cluster yet that refuse each other both keep running and trying their seeds, each logging an error. The name is not a secret: peer messages carry it in the clear; with a cluster key a caller without it is refused before its name is looked at (its Join fails UNAUTHENTICATED)." },
    {
      flag: "seeds", env: "DELTASET_SEEDS", path: "seeds", kind: "list", value: "HOST:PORT,...", readme: true,
      description: "join the cluster through these addresses",
    },
    {
      flag: "seeds-dns", env: "DELTASET_SEEDS_DNS", path: "seedsDns", kind: "string", value: "NAME:PORT", readme: true,
      description: "join through a DNS name (`name:port`, resolved periodically)",
    },
    {
      flag: "peers", env: "DELTASET_PEERS", path: "peers", kind: "list", value: "HOST:PORT,...",
      description: "static peers, treated as seeds (the cluster launcher's list before membership; kept for tests)",
    },
    {
      flag: "key-types", env: "DELTASET_KEY_TYPES", path: "keyTypes", kind: "list", value: "PREFIX=TYPE,...", readme: true,
      description: "fix the type of every key under a prefix (awset, awset-prob, gbf, gcf, orcf, scgbf, scgcf, scorcf, counter; the longest prefix wins): a write that would create such a key as another type is refused FAILED_PRECONDITION, and an Add that names no type creates the rule's",
      details: "A key's type is otherwise fixed by its first write on some node, and two nodes that take a key's first writes at once as two types each keep their own (gossip skips the key): the same rules on every node make that impossible. Keys created before a rule keep their type. Give every node the same rules: a peer's key that breaks this node's rule is skipped like any type conflict.",
    },
    {
      flag: "drain-timeout-ms", env: "DELTASET_DRAIN_TIMEOUT_MS", path: "drainTimeoutMs", kind: "int",
      description: "on SIGTERM, how long running client calls may finish before they are cut (new client calls are refused; peers are answered until the node leaves)",
    },
    {
      flag: "leave-timeout-ms", env: "DELTASET_LEAVE_TIMEOUT_MS", path: "leaveTimeoutMs", kind: "int",
      description: "on SIGTERM, once running calls ended, how long the node keeps gossiping until a neighbour has acknowledged each partition it changed (Algorithm 2; with placement, one of the partition's owners once this node is gone, which takes what only this node holds, and its deferred removes), before it leaves the cluster",
    },
  ],
};

export const STORAGE_SETTINGS: SettingGroup = {
  name: "storage",
  about: "the LevelDB store of the node's data",
  settings: [
    {
      flag: "data-dir", env: "DELTASET_DATA_DIR", path: "dataDir", kind: "string", value: "DIR", readme: true,
      description: "LevelDB directory (refused if foreign or if LevelDB cannot open it; a damaged data block is found when read: DATA_LOSS on its keys, and `deltaset verify` reads every record); created 0700, files 0600",
    },
    {
      flag: "sync", env: "DELTASET_SYNC", path: "sync", kind: "string", value: "fsync|buffered", readme: true,
      description: "`fsync` every group commit, or `buffered` (survives process crashes only)",
    },
    {
      flag: "group-commit-start-operations", env: "DELTASET_GROUP_COMMIT_START_OPERATIONS", path: "groupCommitStartOperations", kind: "int",
      description: "operations queued that start a group commit (one LevelDB batch and its fsync) at once; fewer wait for the end of the event loop's turn (or 256 records), so the operations read from one socket share a batch",
      details: "A long burst of operations is split: the first batch's fsync runs while the rest of the burst is processed, and its answers go out before the burst's last operation is done. Counted in operations, not records, because the time a burst takes to process goes with its operations: a few larger writes still share one batch.",
    },
    {
      flag: "store-write-buffer-bytes", env: "DELTASET_STORE_WRITE_BUFFER_BYTES", path: "storage.writeBufferBytes", kind: "int", readme: true,
      description: "LevelDB write buffer (memtable): bytes of writes gathered in memory before they are sorted into a file (at least 64 KiB)",
      details: "4x LevelDB's default: bulk loads then flush and compact a third as often (measured by `npm run bench:replica`), for up to twice this much memory.",
    },
    {
      flag: "store-cache-bytes", env: "DELTASET_STORE_CACHE_BYTES", path: "storage.cacheBytes", kind: "int", readme: true,
      description: "LevelDB block cache for reads, in bytes (at least 64 KiB)",
    },
    {
      flag: "state-cache-bytes", env: "DELTASET_STATE_CACHE_BYTES", path: "storage.stateCacheBytes", kind: "int",
      description: "memory for the decoded states of keys stored whole (filters, counters, probabilistic sets) kept between operations, as estimated from their encoded size (at least 64 KiB)",
      details: "A state in memory costs no read back on the next Add, Remove, Query or received delta (an ORCF of 2^19 entries took 0.34 s to decode and 0.53 s to index its tags); a state larger than this is read back every time. The estimate is 1x the encoded size for a bloom filter and 36x for a cuckoo filter (its entries are objects): a half-full ORCF of capacity 1M (3.7 MB encoded) counts 134 MB.",
    },
    {
      flag: "presence-filter-bytes", env: "DELTASET_PRESENCE_FILTER_BYTES", path: "storage.presenceFilterBytes", kind: "int",
      description: "memory for the in-memory filters that tell which elements of an add-wins set have no record yet, so adding a new element skips reading it (at least 64 KiB)",
      details: "About 1.25-2.5 bytes per element of the sets that have one: a set gets its filter when it is created or emptied, or by one scan of its records once adds of new elements to it add up to a quarter of its size; filters are not stored, and a set whose filter no longer fits is read as without one. Batch adds of new elements: 17-25% more per second, a fifth less CPU (`npm run bench:replica`).",
    },
    {
      flag: "ttl-sweep-ms", env: "DELTASET_TTL_SWEEP_MS", path: "ttlSweep.periodMs", kind: "int",
      description: "how often adds whose time to live ran out are removed from storage (reads hide them at once; Query's size counts them until then); at least 10 ms",
    },
    {
      flag: "ttl-sweep-batch", env: "DELTASET_TTL_SWEEP_BATCH", path: "ttlSweep.batch", kind: "int",
      description: "expired adds a sweep reads per batch (it runs batches until none is due)",
    },
  ],
};

export const LIMITS_SETTINGS: SettingGroup = {
  name: "limits",
  about: "request limits; past one a call answers RESOURCE_EXHAUSTED (or INVALID_ARGUMENT) naming the setting",
  settings: [
    { flag: "max-key-bytes", env: "DELTASET_MAX_KEY_BYTES", path: "limits.maxKeyBytes", kind: "int", readme: true, description: "most bytes in a key (UTF-8)" },
    { flag: "max-element-bytes", env: "DELTASET_MAX_ELEMENT_BYTES", path: "limits.maxElementBytes", kind: "int", readme: true, description: "most bytes in one element" },
    { flag: "max-elements-per-call", env: "DELTASET_MAX_ELEMENTS_PER_CALL", path: "limits.maxElementsPerCall", kind: "int", readme: true, description: "most elements in one Add, Remove or Query" },
    {
      flag: "max-request-entries",
      env: "DELTASET_MAX_REQUEST_ENTRIES",
      path: "limits.maxRequestEntries",
      kind: "int",
      description: "most entries of repeated fields (elements, texts, context entries) in one client request message, counted before it is decoded (at least --max-elements-per-call)",
    },
    { flag: "max-message-bytes", env: "DELTASET_MAX_MESSAGE_BYTES", path: "limits.maxMessageBytes", kind: "int", readme: true, description: "largest gRPC message received or sent, in bytes (also bounds gossip frames)" },
    { flag: "default-page-size", env: "DELTASET_DEFAULT_PAGE_SIZE", path: "limits.defaultPageSize", kind: "int", description: "members per Query page when the request names none" },
    { flag: "max-page-size", env: "DELTASET_MAX_PAGE_SIZE", path: "limits.maxPageSize", kind: "int", description: "most members a Query page may ask for" },
    { flag: "default-scan-chunk", env: "DELTASET_DEFAULT_SCAN_CHUNK", path: "limits.defaultScanChunk", kind: "int", description: "members per Scan chunk when the request names none" },
    { flag: "max-scan-chunk", env: "DELTASET_MAX_SCAN_CHUNK", path: "limits.maxScanChunk", kind: "int", description: "most members a Scan chunk may ask for" },
    { flag: "default-export-chunk", env: "DELTASET_DEFAULT_EXPORT_CHUNK", path: "limits.defaultExportChunk", kind: "int", description: "entries (set elements) per Export chunk when the request names none" },
    { flag: "max-export-chunk", env: "DELTASET_MAX_EXPORT_CHUNK", path: "limits.maxExportChunk", kind: "int", description: "most entries an Export chunk may ask for" },
    {
      flag: "max-export-chunk-bytes", env: "DELTASET_MAX_EXPORT_CHUNK_BYTES", path: "limits.maxExportChunkBytes", kind: "int",
      description: "most bytes of an Export chunk's slice (the default, and the most a request may ask for); at most half of --max-message-bytes",
    },
    { flag: "stream-window", env: "DELTASET_STREAM_WINDOW", path: "limits.streamWindow", kind: "int", description: "AddStream batches a node works on at once per stream; it reads no further until one is durable (flow control)" },
    {
      flag: "stream-window-bytes", env: "DELTASET_STREAM_WINDOW_BYTES", path: "limits.streamWindowBytes", kind: "int",
      description: "bytes of elements (with framing) of the AddStream batches a node works on at once per stream: the window ends at this or at --stream-window, whichever comes first (a larger batch is still taken, alone)",
    },
    {
      flag: "stream-forwarded-adds", env: "DELTASET_STREAM_FORWARDED_ADDS", path: "limits.streamForwardedAdds", kind: "int",
      description: "with a replication factor: adds of keys the node does not own that one AddStream sends to their owners at once (within the stream window)",
    },
    {
      flag: "max-concurrent-streams", env: "DELTASET_MAX_CONCURRENT_STREAMS", path: "maxConcurrentStreams", kind: "int",
      description: "calls one client connection may have open at once (HTTP/2 streams: unary calls, Watch, Scan, Export, gossip streams); more wait until one ends",
      details: "Bounds what one connection can hold open: without it a caller could open streams without end and never read them.",
    },
    { flag: "max-watchers", env: "DELTASET_MAX_WATCHERS", path: "limits.maxWatchers", kind: "int", description: "Watch streams a node serves at once; one more answers RESOURCE_EXHAUSTED" },
    { flag: "stream-stall-ms", env: "DELTASET_STREAM_STALL_MS", path: "limits.streamStallMs", kind: "int", description: "how long a Scan or Export waits for its reader to take a chunk before it gives up (RESOURCE_EXHAUSTED: resume where it stopped) and closes the store read it holds; at most 2147483647" },
    { flag: "watch-buffer", env: "DELTASET_WATCH_BUFFER", path: "limits.watchBuffer", kind: "int", description: "events a Watch stream may fall behind by before the node ends it (RESOURCE_EXHAUSTED: resume from the last event's context); writes never wait for watchers" },
    { flag: "max-filter-bytes", env: "DELTASET_MAX_FILTER_BYTES", path: "limits.maxFilterBytes", kind: "int", description: "largest filter key (GBF, GCF, ORCF, or a series' first sub-filter) an Add may create, in bytes; also bounds a counter's retry filter and the tombstone filter of an awset-prob key. Received states are held to it too (a series: its first sub-filter; its sub-filters together are bounded by --max-state-bytes): a Merge or Import above it is refused (RESOURCE_EXHAUSTED) and a peer's key above it is skipped (counted as oversized_states), so give every node the same value" },
    {
      flag: "max-state-bytes", env: "DELTASET_MAX_STATE_BYTES", path: "limits.maxStateBytes", kind: "int",
      description: "largest encoded state of a key stored whole (filters, counters, awset-prob sets) a node takes in pieces from a peer's full-state stream or an Import; a larger one is skipped (counted as oversized_states) or refused (RESOURCE_EXHAUSTED), and an Add that would grow an awset-prob set or a scalable filter (a new sub-filter) past it is refused (RESOURCE_EXHAUSTED). At least --max-filter-bytes; a key may hold up to 4 filters (siblings)",
      details: "A state larger than half a message travels in pieces of its encoding, gathered in memory before it is checked and joined: this bounds that memory per stream.",
    },
    { flag: "max-request-id-bytes", env: "DELTASET_MAX_REQUEST_ID_BYTES", path: "limits.maxRequestIdBytes", kind: "int", description: "most bytes (UTF-8) in an Increment's or Add's request_id; a longer one answers RESOURCE_EXHAUSTED" },
    {
      flag: "max-clock-skew-ms", env: "DELTASET_MAX_CLOCK_SKEW_MS", path: "maxClockSkewMs", kind: "int", readme: true,
      description: "the most any two nodes' clocks may differ (ms); counters and filter keys remember request ids for (N+1)·P minus this, an Import counts an export's wait less this against its times to live, and a node that sees a peer's clock further off logs it and counts it in deltaset_clock_skew_reports_total",
    },
    {
      flag: "max-pending-removes", env: "DELTASET_MAX_PENDING_REMOVES", path: "maxPendingRemoves", kind: "int", readme: true,
      description: "elements whose Remove waits here for adds its context covers that have not arrived yet (deferred removes); past it such a Remove answers RESOURCE_EXHAUSTED",
    },
    {
      flag: "max-remove-unseen-dots", env: "DELTASET_MAX_REMOVE_UNSEEN_DOTS", path: "maxRemoveUnseenDots", kind: "int",
      description: "dots not yet received here that one Remove's context may name (they wait as a deferred remove); more answers RESOURCE_EXHAUSTED and changes nothing",
      details: "A context naming dots far ahead of what any replica made (a client's mistake, or a forged one) would wait for good and remove every later add of the element those dots name. Dots a lagging node has not received yet are what it is for: the default allows a million.",
    },
    {
      flag: "max-remove-unseen-replicas", env: "DELTASET_MAX_REMOVE_UNSEEN_REPLICAS", path: "maxRemoveUnseenReplicas", kind: "int",
      description: "replica ids of adds not yet received here that one element's deferred remove may wait for (the Remove's context, joined with what the element already waits for); more answers RESOURCE_EXHAUSTED and changes nothing",
      details: "A key's context names one replica id per start of each node that wrote it, so a node that lags misses a handful. Each one kept costs memory (and time to keep it, on the Remove and when its adds arrive) for as long as its adds have not come, and adds of replica ids that never were never come: without this bound, one Remove naming many thousands of them would keep megabytes per element for good.",
    },
    {
      flag: "max-pending-remove-bytes", env: "DELTASET_MAX_PENDING_REMOVE_BYTES", path: "maxPendingRemoveBytes", kind: "int", readme: true,
      description: "bytes of all deferred removes kept here together (each element's record: key, element and the context it waits for, as stored; held in memory too); a Remove that would pass it answers RESOURCE_EXHAUSTED and changes nothing",
      details: "A record's bytes are what the data directory holds for it; in memory it takes up to about seven times as much (a context of many replica ids), so the default holds them to about 120 MB. Records kept before a restart with a lower value are all kept; Removes that would keep more are refused until the total is back under it.",
    },
  ],
};

export const GOSSIP_SETTINGS: SettingGroup = {
  name: "gossip",
  about: "delta-state anti-entropy between the live members",
  settings: [
    { flag: "partitions", env: "DELTASET_PARTITIONS", path: "partitions", kind: "int", readme: true, description: "anti-entropy partitions (1-65535); keys hash into them, each with its own delta buffer and acks. The same on every node: a member refuses the join of a node whose value differs, and that node exits with status 2",
      details: "Nodes with different partition counts cannot gossip with each other. A node sends its value with every Join, Ping and PingReq, and a member refuses one whose value differs (FAILED_PRECONDITION naming both values), so such a node is never listed ALIVE nor placed; refused by a member of a cluster, the node logs why and exits with status 2 (also when it served alone at first because no seed answered). Two nodes in no cluster yet that refuse each other both keep running and trying their seeds, each logging an error. A node of an earlier version sends no value and is not checked. A data directory keeps the count it was created with." },
    {
      flag: "replication-factor", env: "DELTASET_REPLICATION_FACTOR", path: "replicationFactor", kind: "string", value: "all|R", readme: true,
      description: "copies of each partition: `all` (every node holds every key) or R >= 1 (the R live members ranked first by rendezvous hashing own it; the others forward its calls)",
      details: "The default is `all`: every node answers every read from its own store, which small clusters and every tool that compares the nodes' local states rely on. Use 3 on clusters of more than about five nodes. The same on every node (`all` and R differ, whatever the cluster's size): nodes with different R compute different owners for a key, so a member refuses the join of a node whose value differs and that node exits with status 2, as with --partitions. To change R, stop every node and start them all with the new value.",
    },
    {
      flag: "forward-timeout-ms", env: "DELTASET_FORWARD_TIMEOUT_MS", path: "forwardTimeoutMs", kind: "int",
      description: "with a replication factor: how long a forwarded Import waits for an owner's connection before it tries the next owner, how long an add that an AddStream forwards to an owner may take (the caller's deadline, when sooner, wins), and how long a new owner's fetch of a key from a former holder may take (--read-after-move-ms), and a holder that failed one is passed over",
    },
    {
      flag: "copies-timeout-ms", env: "DELTASET_COPIES_TIMEOUT_MS", path: "copiesTimeoutMs", kind: "int",
      description: "the longest an Add, Remove, Increment, Delete, Merge, Import or AddStream batch that asks for copies (a write concern) waits for the other nodes' acknowledgements that they hold it durably; past it (or past the call's deadline, when sooner) the call answers DEADLINE_EXCEEDED naming how many held it, and the write stays made",
    },
    {
      flag: "read-after-move-ms", env: "DELTASET_READ_AFTER_MOVE_MS", path: "readAfterMoveMs", kind: "int",
      description: "with a replication factor: for this long after a partition's owners change, a Query, Scan or Export that finds its key absent at one owner asks the next owner in turn, then the partition's owners before the change that are still members; and a node that came to own a partition within it first fetches a key it holds part of and is asked to read (a key a read forwarded to it asks for, or it is asked to Delete, to Remove from without a context or to Increment with a request id, even one it holds nothing of) from the members that held the partition before, until each has sent it the partition whole (0: neither)",
      details: "A node that just became an owner of a partition holds nothing of it, or part of it (the chunks of a transfer still arriving, the writes it took since), until the other owners have sent it the partition: without this, reads of keys fully replicated for long answered an empty set for a few seconds after an owner left, died or a node joined (at R = 1, after a join, until the old owner handed the partition over), and a read could answer OK with part of a set. Only an answer that finds the key absent moves on, and only for partitions whose owners changed lately, so a read of a key that does not exist costs up to R calls in that window; the fetch (an Export of the key's delta since what the new owner holds, joined as an Import is once all of it arrived) costs one call per former holder, once per key, within --forward-timeout-ms; a holder that is unreachable or does not answer by then is passed over for as long, and the read answers from what the node holds (a warning is logged).",
    },
    {
      flag: "peer-reconnect-initial-ms", env: "DELTASET_PEER_RECONNECT_INITIAL_MS", path: "peerReconnectInitialMs", kind: "int",
      description: "after a connection to a peer fails, the wait before the next attempt, 1.6x longer after each failure in a row up to --peer-reconnect-max-ms (gossip, membership and forwarded calls; a connection that works resets it)",
      details: "Calls to a peer fail at once while its connection waits to be retried. gRPC's own default waits 1 s after a failed attempt, growing to 120 s: one reset met while reconnecting kept every call to that peer failing for about a second, and the wait grew to two minutes while a peer stayed unreachable.",
    },
    {
      flag: "peer-reconnect-max-ms", env: "DELTASET_PEER_RECONNECT_MAX_MS", path: "peerReconnectMaxMs", kind: "int",
      description: "the longest wait between attempts to reconnect to a peer: how long after a partition heals a node may still wait to talk to the other side",
    },
    { flag: "gossip-interval-ms", env: "DELTASET_GOSSIP_INTERVAL_MS", path: "gossip.intervalMs", kind: "int", readme: true, description: "milliseconds between anti-entropy rounds (at least 10)" },
    {
      flag: "gossip-algorithm", env: "DELTASET_GOSSIP_ALGORITHM", path: "gossip.algorithm", kind: "string", value: "alg1|alg2", readme: true,
      description: "`alg2` (acknowledged delta intervals) or `alg1` (delta-groups)",
    },
    {
      flag: "gossip-choose", env: "DELTASET_GOSSIP_CHOOSE", path: "gossip.choose", kind: "string", value: "state|delta|delta+periodic-state",
      description: "Algorithm 1's choice: ship full state, the delta-group, or the delta-group with a periodic full state",
    },
    {
      flag: "gossip-overlay", env: "DELTASET_GOSSIP_OVERLAY", path: "gossip.overlay", kind: "string", value: "all|fingers",
      description: "who a node gossips with: every live member (`all`), or about 2·log2(n) of them, at ring distances 1, 2, 4, ... of a hash ring of the live members (`fingers`: traffic per update grows with n·log n instead of n²)",
    },
    { flag: "gossip-bp", env: "DELTASET_GOSSIP_BP", path: "gossip.bp", kind: "bool", readme: true, description: "avoid back-propagation of deltas to their origin (Algorithm 2)" },
    { flag: "gossip-rr", env: "DELTASET_GOSSIP_RR", path: "gossip.rr", kind: "bool", readme: true, description: "redundancy removal: buffer only the new part of received deltas (Algorithm 2)" },
    { flag: "gossip-transitive", env: "DELTASET_GOSSIP_TRANSITIVE", path: "gossip.transitive", kind: "bool", description: "Algorithm 1: forward what was received (its new part) as well as local deltas" },
    { flag: "gossip-max-buffer-bytes", env: "DELTASET_GOSSIP_MAX_BUFFER_BYTES", path: "gossip.maxBufferBytes", kind: "int", description: "delta buffer size per partition, in bytes, before falling back to full state" },
    { flag: "state-chunk-entries", env: "DELTASET_STATE_CHUNK_ENTRIES", path: "gossip.stateChunkEntries", kind: "int", description: "elements per chunk of a full-state transfer (a chunk also holds at most half of --max-message-bytes of them)" },
    { flag: "gossip-rpc-timeout-ms", env: "DELTASET_GOSSIP_RPC_TIMEOUT_MS", path: "gossip.rpcTimeoutMs", kind: "int", description: "deadline of one gossip RPC (not of a full-state stream: see --gossip-state-stream-stall-ms), in milliseconds" },
    {
      flag: "gossip-state-stream-bytes", env: "DELTASET_GOSSIP_STATE_STREAM_BYTES", path: "gossip.stateStreamBytes", kind: "int",
      description: "a full-state stream to a neighbour ends after the partition that brings it to this many payload bytes, and the next stream carries on once the neighbour has acknowledged it",
      details: "A neighbour acknowledges a stream's partitions when the stream ends: a catch-up of gigabytes in one stream would hold every acknowledgement to its end and lose them all if it broke. A partition always goes whole in one stream.",
    },
    {
      flag: "gossip-state-stream-stall-ms", env: "DELTASET_GOSSIP_STATE_STREAM_STALL_MS", path: "gossip.stateStreamStallMs", kind: "int",
      description: "a full-state stream that moves nothing (no chunk taken by the neighbour, or no answer after the last) for this many ms is cancelled and retried later; one that moves runs as long as it needs",
    },
    {
      flag: "gossip-catch-up-by-contexts", env: "DELTASET_GOSSIP_CATCH_UP_BY_CONTEXTS", path: "gossip.catchUpByContexts", kind: "bool",
      description: "Algorithm 2: before pushing a partition's full state to a neighbour, ask what it holds there (Gossip/Contexts) and push each set only what it lacks, and no key it already holds; off: every key goes whole. Algorithm 1, whose full states are its routine, always pushes them whole",
      details: "A node back from a restart with its data then receives, and sends, almost nothing instead of every partition from and to each neighbour. A set whose live digest (kept in its header) agrees with the neighbour's, under a context within the neighbour's, is left out without even being read. Counted in deltaset_gossip_transport_events_total, events catch_up_delta_keys, catch_up_keys_skipped (of them catch_up_keys_unread) and catch_up_stale.",
    },
    {
      flag: "gossip-contexts-reply-bytes", env: "DELTASET_GOSSIP_CONTEXTS_REPLY_BYTES", path: "gossip.contextsReplyBytes", kind: "int",
      description: "most bytes of this node's answer to a neighbour's Contexts request; the keys past it are not listed, and the neighbour pushes them whole",
    },
    {
      flag: "gossip-contexts-claim-ms", env: "DELTASET_GOSSIP_CONTEXTS_CLAIM_MS", path: "gossip.contextsClaimMs", kind: "int",
      description: "after answering a neighbour's Contexts request for a partition, tell other neighbours asking about it to push it later (busy) until that neighbour's push stream ends, or for this many ms if it never starts (0: never tell them to wait)",
      details: "A node caught up by all its neighbours at once (a wiped one) then receives about one copy of the data instead of one per neighbour. Counted in deltaset_gossip_transport_events_total, events contexts_answered_busy (at the node answering) and catch_up_busy_deferred (at the neighbour told to wait).",
    },
    {
      flag: "gossip-contexts-ahead", env: "DELTASET_GOSSIP_CONTEXTS_AHEAD", path: "gossip.contextsAhead", kind: "int",
      description: "partitions of a full-state push whose Contexts question is sent before the push reaches them (at least 1); 1 asks one partition at a time, a round trip each. Only partitions holding a key are asked about",
      details: "Answers waiting for the stream are held in memory: at most this many times --gossip-contexts-reply-bytes per push. Measured while the full-state mode (Algorithm 1) still asked, on 3 nodes with 50 ms of latency each way and 4 keys (a scratch cell like eval:types'): convergence in 0.28-0.74 s (4 rounds) asking one at a time, 0.29-0.31 s with 32, 0.12-0.29 s without Contexts. Only Algorithm 2 asks now.",
    },
    {
      flag: "gossip-push-local-ms", env: "DELTASET_GOSSIP_PUSH_LOCAL_MS", path: "gossip.pushLocalMs", kind: "int",
      description: "Algorithm 2: push local changes to every neighbour this many ms after them instead of waiting for the next period (0: off); lowers replication lag, costs more and smaller exchanges",
    },
    {
      flag: "gossip-push-retry-ms", env: "DELTASET_GOSSIP_PUSH_RETRY_MS", path: "gossip.pushRetryMs", kind: "int",
      description: "with --gossip-push-local-ms: a push whose call failed (the neighbour down, a broken stream) goes again after this many ms (at least the push delay), doubling with each failure in a row up to the gossip period",
    },
    {
      flag: "gossip-settle-ms", env: "DELTASET_GOSSIP_SETTLE_MS", path: "gossip.settleMs", kind: "int",
      description: "a probabilistic set (AWSET_PROB) whose reads changed on this node is sent whole to every neighbour once it had no such change for this many ms (0: off)",
      details: "Its deltas can lose a dot or a remove on the way (filters union only in part and forget); this lets replicas that a burst of writes left apart meet again without another write.",
    },
    {
      flag: "gossip-settle-max-wait-ms", env: "DELTASET_GOSSIP_SETTLE_MAX_WAIT_MS", path: "gossip.settleMaxWaitMs", kind: "int",
      description: "a probabilistic set still changing this many ms after its first change not yet announced is sent whole anyway, without waiting for a quiet spell (0: only once quiet; counted in deltaset_gossip_transport_events_total, event settle_overdue)",
      details: "A key written without a pause never goes quiet; this way its replicas are repaired at least this often, not only once the writes stop.",
    },
    {
      flag: "gossip-settle-max-bytes", env: "DELTASET_GOSSIP_SETTLE_MAX_BYTES", path: "gossip.settleMaxBytes", kind: "int",
      description: "largest encoded state a settle announcement sends; larger keys are not announced (counted in deltaset_gossip_transport_events_total, event settle_too_large)",
    },
    {
      flag: "gossip-settle-bytes-per-period", env: "DELTASET_GOSSIP_SETTLE_BYTES_PER_PERIOD", path: "gossip.settleBytesPerPeriod", kind: "int",
      description: "encoded bytes of settle announcements one gossip period puts in the delta buffers, at most (at least one key); keys past it wait for the next period, oldest change first",
    },
    {
      flag: "gossip-refused-joins-bytes", env: "DELTASET_GOSSIP_REFUSED_JOINS_BYTES", path: "gossip.refusedJoinsBytes", kind: "int",
      description: "encoded bytes of received counter states this node refused to join (their sum would leave int64) that it keeps in memory, to join once a change of the key (a decrement here or from elsewhere) brings them back in range; a refusal past it is not kept (counted in deltaset_gossip_transport_events_total, event refused_joins_not_held, and logged), and that key's replicas then meet only once it is written again (0: keep none)",
      details: "The refusing node acknowledges what it refused, so its sender sends it no more: what is kept here is what lets the replicas converge without another write. A key whose sum stays out of range costs one join attempt per change of it and no traffic. Events refused_joins_held and refused_joins_joined count refusals kept and later joined.",
    },
    {
      flag: "gossip-exchange-stream", env: "DELTASET_GOSSIP_EXCHANGE_STREAM", path: "gossip.exchangeStream", kind: "bool",
      description: "send gossip frames on one long-lived ExchangeStream per neighbour instead of an Exchange call each (less CPU per frame: no call set-up); a neighbour without it gets calls",
    },
    {
      flag: "gossip-stream-frames-in-flight", env: "DELTASET_GOSSIP_STREAM_FRAMES_IN_FLIGHT", path: "gossip.streamFramesInFlight", kind: "int",
      description: "frames of one incoming ExchangeStream applied at once; past it the stream is paused and HTTP/2 flow control holds the sender",
    },
    {
      flag: "gossip-max-forward-elements", env: "DELTASET_GOSSIP_MAX_FORWARD_ELEMENTS", path: "gossip.maxBufferedStateElements", kind: "int",
      aliases: { paths: ["gossip.maxForwardElements"] },
      description: "a received catch-up whose new part exceeds this many elements is forwarded to the other neighbours by full state instead of being buffered",
      details: "So peers never depend on the original sender surviving.",
    },
  ],
};

export const MEMBERSHIP_SETTINGS: SettingGroup = {
  name: "membership",
  about: "SWIM failure detection and dissemination (the names are those of the membership core's MembershipConfig)",
  settings: [
    { flag: "probe-interval-ms", env: "DELTASET_PROBE_INTERVAL_MS", path: "membership.probeIntervalMs", kind: "int", readme: true, description: "period between two probes started by this node (failure detection; at least 10 ms)" },
    { flag: "probe-timeout-ms", env: "DELTASET_PROBE_TIMEOUT_MS", path: "membership.probeTimeoutMs", kind: "int", readme: true, description: "how long a direct ping may take before indirect probes are sent; keep it at about twice the slowest round trip between nodes (below the round trip, probes fail, and the indirect probes and suspicions that follow multiply membership traffic); a node logs a warning when the p95 of its recent probe round trips passes half of it, and exports them as deltaset_membership_probe_rtt_ms" },
    {
      flag: "indirect-checks", env: "DELTASET_INDIRECT_CHECKS", path: "membership.indirectChecks", kind: "int",
      aliases: { flags: ["indirect-probes"], envs: ["DELTASET_INDIRECT_PROBES"], paths: ["membership.indirectProbes"] },
      description: "how many other members are asked to probe the target when the direct ping fails (k; 0 disables indirect probes)",
    },
    {
      flag: "indirect-timeout-ms", env: "DELTASET_INDIRECT_TIMEOUT_MS", path: "membership.indirectTimeoutMs", kind: "int",
      description: "how long the prober waits for indirect answers (each helper waits for the target 80% of this)",
    },
    {
      flag: "suspicion-mult", env: "DELTASET_SUSPICION_MULT", path: "membership.suspicionMult", kind: "int",
      description: "suspicion timeout = suspicionMult * max(1, log10(n + 1)) * probeIntervalMs, for n live members",
    },
    {
      flag: "retransmit-mult", env: "DELTASET_RETRANSMIT_MULT", path: "membership.retransmitMult", kind: "int",
      description: "each node piggybacks an update at most retransmitMult * ceil(log10(n + 1)) times",
    },
    { flag: "max-piggyback", env: "DELTASET_MAX_PIGGYBACK", path: "membership.maxPiggyback", kind: "int", description: "most updates piggybacked on one message" },
    {
      flag: "reap-after-ms", env: "DELTASET_REAP_AFTER_MS", path: "membership.reapAfterMs", kind: "int", readme: true,
      description: "DEAD and LEFT members are forgotten (reaped) this long after their state changed",
    },
    {
      flag: "push-pull-interval-ms", env: "DELTASET_PUSH_PULL_INTERVAL_MS", path: "membership.pushPullIntervalMs", kind: "int",
      description: "period of the full-view pull from a random member, which repairs missed updates (0 disables; otherwise at least 10 ms)",
    },
    {
      flag: "membership-request-timeout-ms", env: "DELTASET_MEMBERSHIP_REQUEST_TIMEOUT_MS", path: "membership.requestTimeoutMs", kind: "int",
      description: "deadline of Join and Leave calls and of the push/pull",
    },
    { flag: "leave-fanout", env: "DELTASET_LEAVE_FANOUT", path: "membership.leaveFanout", kind: "int", description: "how many live members a leaving node tells directly" },
    {
      flag: "membership-max-updates", env: "DELTASET_MEMBERSHIP_MAX_UPDATES", path: "membership.maxUpdatesPerMessage", kind: "int",
      description: "most updates or members accepted in one inbound membership message; bounds the view a Join reply carries, so it must exceed the cluster size",
    },
  ],
};

export const SECURITY_SETTINGS: SettingGroup = {
  name: "security",
  about: "TLS, peer authentication and client tokens (see docs/security.md); SIGHUP, or editing the files, reloads them",
  settings: [
    {
      flag: "tls-cert", env: "DELTASET_TLS_CERT", path: "tls.cert", kind: "string", value: "FILE", readme: true, defaultText: "plaintext",
      description: "the node's certificate (PEM): serve TLS (with --tls-key)",
      details: "A TLS key that is not the certificate's, or a certificate outside its validity dates, stops start-up with one line saying which.",
    },
    { flag: "tls-key", env: "DELTASET_TLS_KEY", path: "tls.key", kind: "string", value: "FILE", readme: true, defaultText: "plaintext", description: "the private key of --tls-cert (PEM)" },
    {
      flag: "tls-ca", env: "DELTASET_TLS_CA", path: "tls.ca", kind: "string", value: "FILE", readme: true, defaultText: "none",
      description: "a CA certificate (PEM; a file holding none, such as a key, stops start-up): peer calls also need a node certificate from it naming the node id (mutual TLS), unless `--tls-mutual false`",
    },
    {
      flag: "tls-mutual", env: "DELTASET_TLS_MUTUAL", path: "tls.mutual", kind: "bool", readme: true, defaultText: "true with --tls-ca",
      description: "with a CA, require node certificates of peers; `false`: the CA only verifies the peers a node dials (the cluster key authenticates them); `true` without --tls-ca stops start-up",
      details: "With `false` one certificate may serve every node: TLS everywhere, peers prove themselves with the cluster key.",
    },
    {
      flag: "cluster-key-file", env: "DELTASET_CLUSTER_KEY_FILE", path: "clusterKeyFile", kind: "string", value: "FILE", readme: true,
      defaultText: "none (`deltaset cluster` makes one)",
      description: "keys with which peers prove every Gossip and Membership call (one per line; the first signs, all verify)",
    },
    {
      flag: "insecure-peers", env: "DELTASET_INSECURE_PEERS", path: "insecurePeers", kind: "bool", bare: true, readme: true,
      description: "allow a non-loopback listen address with neither a cluster key nor mutual TLS (refused otherwise)",
      details: "Peer calls are then unauthenticated: anyone who reaches the port can gossip and change membership.",
    },
    {
      flag: "insecure-clients", env: "DELTASET_INSECURE_CLIENTS", path: "insecureClients", kind: "bool", bare: true, readme: true,
      description: "allow a non-loopback listen address without client tokens (--auth-tokens-file; refused otherwise)",
      details: "The client API (Replica: reads, writes, Delete, Merge, Import) is then open to whoever reaches the port: keep them out with a NetworkPolicy or firewall.",
    },
    {
      flag: "peer-legacy-proofs", env: "DELTASET_PEER_LEGACY_PROOFS", path: "peerLegacyProofs", kind: "bool", bare: true,
      description: "with a cluster key, a rolling upgrade from an earlier version: accept peer calls whose proofs name no receiver or no body digest, and sign this node's calls both the earlier way and this version's (off after the upgrade)",
      details: "While this is on, a proof captured on its way to another node can be replayed here (and this node's to a node of the earlier version) within the 60 s window, and a call without a body digest has its message decoded before its proof can be checked, so an unauthenticated caller can make the node decode messages up to --max-message-bytes. Turning it off node by node afterwards keeps the cluster whole: nodes of this version read the newer proof whether the setting is on or off.",
    },
    {
      flag: "auth-tokens-file", env: "DELTASET_AUTH_TOKENS_FILE", path: "authTokensFile", kind: "string", value: "FILE", readme: true,
      description: "bearer tokens, one per line: `<scopes> <token>`, the scopes a comma-separated list of read, write and admin (e.g. `read,write t0k3n`), or a bare `<token>` (read and write); Merge and Import need admin; health and reflection stay open",
    },
  ],
};

export const TELEMETRY_SETTINGS: SettingGroup = {
  name: "telemetry",
  about: "logs, metrics and traces; off loads no telemetry code",
  settings: [
    { flag: "log-level", env: "DELTASET_LOG_LEVEL", path: "logLevel", kind: "string", value: "debug|info|warn|error", description: "least severity logged (JSON lines on stderr)" },
    {
      flag: "metrics-listen", env: "DELTASET_METRICS_LISTEN", path: "metricsListen", kind: "string", value: "HOST:PORT", readme: true, defaultText: "off",
      description: "Prometheus endpoint (`/metrics`; a bare port means 127.0.0.1; another host needs `--metrics-expose`, as it is plain HTTP)",
    },
    { flag: "metrics-expose", env: "DELTASET_METRICS_EXPOSE", path: "metricsExpose", kind: "bool", description: "allow a non-loopback metrics address (plain HTTP; it shows the node id)" },
    {
      flag: "tracing", env: "DELTASET_TRACING", path: "tracing", kind: "string", value: "off|console|none|otlp", readme: true,
      description: "spans: `console` (stdout), `otlp` (with `--otlp-endpoint`), `none` (recorded, not exported), or `off`; with metrics off too, no telemetry code is loaded",
    },
    {
      flag: "otlp-endpoint", env: "DELTASET_OTLP_ENDPOINT", path: "otlpEndpoint", kind: "string", value: "URL",
      description: "OTLP/HTTP traces URL (e.g. http://127.0.0.1:4318/v1/traces); required by `--tracing otlp`",
    },
  ],
};

export const CHAOS_SETTINGS: SettingGroup = {
  name: "chaos",
  about: "fault injection for tests and chaos runs; off in production",
  settings: [
    {
      flag: "peer-proxy", env: "DELTASET_PEER_PROXY", path: "peerProxy", kind: "string", value: "HOST:PORT", readme: true,
      description: "a Toxiproxy API: peer links are dialed through one proxy per link (chaos runs)",
    },
    {
      flag: "gossip-loss-rate", env: "DELTASET_GOSSIP_LOSS_RATE", path: "gossip.lossRate", kind: "fraction",
      description: "probability (0..1) of dropping each outgoing gossip send: loss inside the gossip layer, for tests of the algorithms over lossy channels",
    },
    { flag: "gossip-loss-seed", env: "DELTASET_GOSSIP_LOSS_SEED", path: "gossip.lossSeed", kind: "int", description: "seed of the loss decisions of --gossip-loss-rate" },
  ],
};

/** Every subsystem's table, in the order of --help and the docs. */
export const SETTING_GROUPS: readonly SettingGroup[] = [
  NODE_SETTINGS,
  STORAGE_SETTINGS,
  LIMITS_SETTINGS,
  GOSSIP_SETTINGS,
  MEMBERSHIP_SETTINGS,
  SECURITY_SETTINGS,
  TELEMETRY_SETTINGS,
  CHAOS_SETTINGS,
];

/** Every setting of NodeConfig, flat. */
export const SETTINGS: readonly Setting[] = SETTING_GROUPS.flatMap((g) => g.settings);
