// A decoded state must own its memory. Decoders get Node Buffers (gRPC messages, LevelDB reads),
// and Buffer's slice is a view, not a copy: a state holding views of its input changes when that
// memory is written, and two states decoded from one buffer (the store's cached state and a delta
// handed to gossip) change together when either is joined into in place; so do a decoded state
// and its clones, when cloning copies byte arrays with slice().
import { strict as assert } from "node:assert";
import type { Lattice } from "../../services/crdt/index.ts";

export function assertDecodedOwnsItsBytes<S>(L: Lattice<S>, s: S, other: S, now?: number): void {
  const bytes = Buffer.from(L.encode(s));
  // A pooled Buffer, as the transports hand them over.
  const input = Buffer.from(bytes);
  const decoded = L.decode(input, now);
  input.fill(0xa5);
  assert.deepEqual(Buffer.from(L.encode(decoded)), bytes, `${L.name}: the decoded state changed when its input buffer was overwritten`);
  // Two decodes of one buffer, one joined into in place: the other stays as it was.
  const shared = Buffer.from(bytes);
  const a = L.decode(shared, now);
  const b = L.decode(shared, now);
  L.joinInPlace(a, other);
  assert.deepEqual(Buffer.from(L.encode(b)), bytes, `${L.name}: a state decoded from a buffer changed when another decoded from it was joined into`);
  // A clone of a decoded state, and the state it was cloned from, change apart.
  const original = L.decode(Buffer.from(bytes), now);
  const copy = L.clone(original);
  L.joinInPlace(original, other);
  assert.deepEqual(Buffer.from(L.encode(copy)), bytes, `${L.name}: a clone of a decoded state changed when the state was joined into`);
  const again = L.decode(Buffer.from(bytes), now);
  L.joinInPlace(L.clone(again), other);
  assert.deepEqual(Buffer.from(L.encode(again)), bytes, `${L.name}: a decoded state changed when its clone was joined into`);
}
