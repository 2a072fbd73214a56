// The lines of a byte stream as bytes, for `deltaset add --stdin`: split on LF (a CR before it is
// dropped, for CRLF files), the last line kept as it is when no LF ends it. Lines are never decoded as text, so an
// element that is not valid UTF-8 reaches the node with its exact bytes (a text decoder would put
// U+FFFD in its place, and distinct lines would become one element).
export async function* byteLines(input: AsyncIterable<Uint8Array>): AsyncGenerator<Buffer> {
  let rest = Buffer.alloc(0);
  for await (const piece of input) {
    const buf = rest.length === 0 ? Buffer.from(piece) : Buffer.concat([rest, piece]);
    let start = 0;
    for (let nl = buf.indexOf(0x0a, start); nl >= 0; nl = buf.indexOf(0x0a, start)) {
      yield withoutCr(buf.subarray(start, nl));
      start = nl + 1;
    }
    rest = Buffer.from(buf.subarray(start));
  }
  if (rest.length > 0) yield rest;
}

function withoutCr(line: Buffer): Buffer {
  return line.length > 0 && line[line.length - 1] === 0x0d ? line.subarray(0, line.length - 1) : line;
}
