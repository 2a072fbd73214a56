// Copies that decoded states own.

/**
 * A plain Uint8Array copy of b. Decoders must not keep views of their input: it is often a Node
 * Buffer (a gRPC message, a LevelDB read), whose slice() is a view and not a copy, so a state
 * would share memory with its input and with every other state decoded from it, and a join
 * into one in place would change the others (the store's cached state and a delta handed to
 * gossip, say). The copy is a plain Uint8Array, whose slice() copies.
 */
export function ownedCopy(b: Uint8Array): Uint8Array {
  const out = new Uint8Array(b.length);
  out.set(b);
  return out;
}
