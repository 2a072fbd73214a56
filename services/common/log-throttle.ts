// Rate limit for repeated warnings about the same thing (a key, a peer): the first occurrence is
// logged at once, later ones at most once per interval with the number suppressed in between, so
// a condition that recurs every gossip round does not flood the log.
export interface LogThrottle {
  /** undefined: stay quiet now; otherwise log, mentioning this many suppressed occurrences. */
  admit(subject: string): { suppressed: number } | undefined;
}

export function logThrottle(intervalMs: number, maxSubjects = 1000, now: () => number = Date.now): LogThrottle {
  const seen = new Map<string, { at: number; suppressed: number }>();
  return {
    admit(subject) {
      const t = now();
      const s = seen.get(subject);
      if (s !== undefined && t - s.at < intervalMs) {
        s.suppressed++;
        return undefined;
      }
      // Bounded memory: forget the oldest subject (Map keeps insertion order).
      if (s === undefined && seen.size >= maxSubjects) seen.delete(seen.keys().next().value!);
      seen.delete(subject);
      seen.set(subject, { at: t, suppressed: 0 });
      return { suppressed: s?.suppressed ?? 0 };
    },
  };
}
