// ExchangeStream's messages carry their MAC as the last field written (GossipFrame.mac,
// GossipReply.mac); the MAC covers the message's bytes without that field. Pure.

/** Length of a stream message MAC (HMAC-SHA256). */
export const STREAM_MAC_BYTES = 32;

/** The `mac` of a message without one: every message but ExchangeStream's signed ones. */
export const NO_MAC = Buffer.alloc(0);

/** The key of field `field`, length-delimited, as protobuf writes it (a varint). */
function fieldKey(field: number): number[] {
  const out: number[] = [];
  for (let v = (field << 3) | 2; ; v >>>= 7) {
    if (v < 0x80) {
      out.push(v);
      return out;
    }
    out.push((v & 0x7f) | 0x80);
  }
}

/**
 * The bytes a message's MAC covers: `bytes` without its trailing `mac` field (number `field`,
 * length-delimited), when the message decoded to a 32-byte `mac` that is exactly those last bytes;
 * otherwise all of `bytes` (a message without a MAC, which then fails verification).
 */
export function withoutTrailingMac(bytes: Uint8Array, field: number, mac: Uint8Array | undefined): Uint8Array {
  const key = fieldKey(field);
  const n = bytes.length;
  const start = n - STREAM_MAC_BYTES - key.length - 1;
  if (mac === undefined || mac.length !== STREAM_MAC_BYTES || start < 0) return bytes;
  for (let i = 0; i < key.length; i++) if (bytes[start + i] !== key[i]) return bytes;
  if (bytes[start + key.length] !== STREAM_MAC_BYTES) return bytes;
  for (let i = 0; i < STREAM_MAC_BYTES; i++) if (bytes[n - STREAM_MAC_BYTES + i] !== mac[i]) return bytes;
  return bytes.subarray(0, start);
}

/**
 * `bytes` (a message encoded without its MAC) with the MAC appended as field `field`: what the
 * message with its `mac` set encodes to, since the encoder writes that field last.
 */
export function withTrailingMac(bytes: Uint8Array, field: number, mac: Uint8Array): Buffer {
  if (mac.length !== STREAM_MAC_BYTES) throw new Error(`a stream MAC is ${STREAM_MAC_BYTES} bytes, not ${mac.length}`);
  const key = fieldKey(field);
  const out = Buffer.allocUnsafe(bytes.length + key.length + 1 + STREAM_MAC_BYTES);
  out.set(bytes, 0);
  out.set(key, bytes.length);
  out[bytes.length + key.length] = STREAM_MAC_BYTES;
  out.set(mac, bytes.length + key.length + 1);
  return out;
}
