// How many members fit in one answer: Query pages and Scan chunks are bounded by a member count
// and by bytes, so that a page of large elements (a thousand of 64 KiB) still fits in one message.

/** Bytes one member costs in an answer: its element, and room for the field's framing. */
export function memberSize(element: Uint8Array): number {
  return element.length + 16;
}

/**
 * Bytes of members one page or chunk may carry: a quarter of the largest message, leaving the rest
 * for each member's text (a copy of its bytes when asked for), its dots, and the first chunk's context.
 */
export function memberBytesBudget(maxMessageBytes: number): number {
  return Math.max(1, Math.floor(maxMessageBytes / 4));
}

/** How many of the members from index `from` on fit in maxCount and maxBytes: at least one when there is one. */
export function membersThatFit(members: readonly Uint8Array[], maxCount: number, maxBytes: number, from = 0): number {
  let bytes = 0;
  let n = 0;
  while (from + n < members.length && n < maxCount) {
    const size = memberSize(members[from + n]!);
    if (n > 0 && bytes + size > maxBytes) break;
    bytes += size;
    n++;
  }
  return n;
}
