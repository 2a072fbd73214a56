// Length-delimited binary streams of protobuf messages (each message preceded by the varint of its
// length, as protobuf's writeDelimited does): what `deltaset export` writes to stdout and
// `deltaset import` reads from stdin.
import { varintSize, writeVarint } from "../common/varint.js";

/** A stream that is not a sequence of length-delimited messages, or is cut inside one. */
export class DelimitedStreamError extends Error {
  override readonly name = "DelimitedStreamError";
}

/** One message with its length prefix. */
export function delimited(message: Uint8Array): Buffer {
  const out = Buffer.alloc(varintSize(message.length) + message.length);
  const at = writeVarint(out, 0, message.length);
  out.set(message, at);
  return out;
}

/**
 * The messages of a length-delimited stream, however its bytes are split into reads. A length
 * above maxBytes (a stream of something else, most likely) or a stream cut inside a message is
 * refused with DelimitedStreamError.
 */
export async function* readDelimited(input: AsyncIterable<Uint8Array>, maxBytes: number): AsyncGenerator<Uint8Array> {
  let buf = Buffer.alloc(0);
  let offset = 0;
  let index = 0;
  for await (const piece of input) {
    buf = offset === buf.length ? Buffer.from(piece) : Buffer.concat([buf.subarray(offset), piece]);
    offset = 0;
    for (;;) {
      const head = readLength(buf, offset, maxBytes, index);
      if (head === undefined || head.start + head.length > buf.length) break;
      yield buf.subarray(head.start, head.start + head.length);
      offset = head.start + head.length;
      index++;
    }
  }
  if (offset < buf.length) throw new DelimitedStreamError(`the stream ends inside message ${index} (${buf.length - offset} byte(s) left over): was it cut?`);
}

/** The length prefix at offset, or undefined when its bytes have not all arrived. */
function readLength(buf: Buffer, offset: number, maxBytes: number, index: number): { start: number; length: number } | undefined {
  let length = 0;
  let scale = 1;
  for (let i = offset; i < buf.length; i++) {
    const b = buf[i]!;
    length += (b & 0x7f) * scale;
    if (length > maxBytes) throw new DelimitedStreamError(`message ${index} claims ${length}+ bytes, more than the ${maxBytes} allowed: not a length-delimited export stream?`);
    if ((b & 0x80) === 0) return { start: i + 1, length };
    scale *= 128;
  }
  return undefined;
}
