// The limits the Replica service enforces on every request (sizes, counts, pages); each is a
// node setting (node/config.ts), and every refusal names the limit to change.
export interface Limits {
  /** Most bytes in a key (UTF-8). */
  maxKeyBytes: number;
  /** Most bytes in one element. */
  maxElementBytes: number;
  /** Most elements in one Add, Remove or Query. */
  maxElementsPerCall: number;
  /**
   * Most entries of repeated fields (elements, texts, context entries, at every depth) in one client
   * request message, counted before it is decoded (node/strict-strings.ts).
   */
  maxRequestEntries: number;
  /** Largest gRPC message received or sent, in bytes. */
  maxMessageBytes: number;
  /** Members per Query page when the request names none, and the most it may ask for. */
  defaultPageSize: number;
  maxPageSize: number;
  /** Members per Scan chunk when the request names none, and the most it may ask for. */
  defaultScanChunk: number;
  maxScanChunk: number;
  /** Entries (set elements) per Export chunk when the request names none, and the most it may ask for. */
  defaultExportChunk: number;
  maxExportChunk: number;
  /** Most bytes of an Export chunk's slice (the default, and the most a request may ask for). */
  maxExportChunkBytes: number;
  /** Largest filter key (GBF, GCF, ORCF and the first sub-filter of a series) an Add may create, in bytes. */
  maxFilterBytes: number;
  /** Largest encoded state of a key stored whole gathered from the pieces of an Import or a peer's stream. */
  maxStateBytes: number;
  /** Most bytes (UTF-8) in an Increment's request_id. */
  maxRequestIdBytes: number;
  /** AddStream batches a node works on at once per stream (it reads no further meanwhile). */
  streamWindow: number;
  /** Bytes of elements (with framing) of those batches, the other bound of the same window. */
  streamWindowBytes: number;
  /** Adds of keys owned elsewhere an AddStream sends to owners at once (placement). */
  streamForwardedAdds: number;
  /** Watch streams a node serves at once. */
  maxWatchers: number;
  /** How long a Scan or Export waits for its reader to take a chunk before it gives up (ms). */
  streamStallMs: number;
  /** Events a watcher may fall behind by before its stream is ended (RESOURCE_EXHAUSTED). */
  watchBuffer: number;
}
