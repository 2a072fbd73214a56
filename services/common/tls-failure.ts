// Whether a failed call's error text says TLS failed (a certificate not trusted, a handshake that
// broke): a configuration problem that retrying never fixes, worth a warning rather than the debug
// line a peer that is merely down gets.

/** True when the text of an error looks like a TLS failure. */
export function looksLikeTlsFailure(text: string): boolean {
  return /certificate|SSL|TLS|handshake/i.test(text);
}
