// Replica limits for tests that call the service's handlers without a node: small enough that a
// test can reach them, each overridable.
import type { Limits } from "../../services/replica/limits.ts";

export function testLimits(overrides: Partial<Limits> = {}): Limits {
  return {
    maxKeyBytes: 1024,
    maxElementBytes: 1024,
    maxElementsPerCall: 1000,
    maxRequestEntries: 10_000,
    maxMessageBytes: 1 << 20,
    defaultPageSize: 100,
    maxPageSize: 1000,
    defaultScanChunk: 100,
    maxScanChunk: 1000,
    defaultExportChunk: 100,
    maxExportChunk: 1000,
    maxExportChunkBytes: 1 << 16,
    maxFilterBytes: 1 << 20,
    maxStateBytes: 1 << 22,
    maxRequestIdBytes: 128,
    streamWindow: 64,
    streamWindowBytes: 8 * 1024 * 1024,
    streamForwardedAdds: 16,
    maxWatchers: 1000,
    watchBuffer: 10_000,
    streamStallMs: 60_000,
    ...overrides,
  };
}
