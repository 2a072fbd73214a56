// The part of an add-wins set a given context lacks (Export's `since`), computed one chunk of
// entries at a time so that a set too big for memory streams out as a delta.
//
// For a set X = (entries, ctx) and a context C the delta is:
//  - entries: every element holding a dot C lacks, with just those dots;
//  - context: X.ctx minus C, the context the entries are joined with (chunk by chunk, with the
//    chunked-transfer rule of chunk-slice.ts);
//  - removed: the dots inside C that X has seen and no longer holds (X's removes of them), joined
//    after the entries as a remove.
// The context leaves out X's live dots inside C on purpose: a copy that already holds them must
// not read their absence from the delta as a remove. Joined into a copy Y whose context includes
// C, the delta gives exactly Y ⊔ X; joined anywhere, it is ⊑ X (it only adds dots X holds and only
// removes dots X removed).
import { AWSet, type ElementKey } from "./awset.js";
import { CausalContext } from "./causal-context.js";
import type { DotSet } from "./dot-store.js";
import type { Dot } from "./dot.js";

export class SinceCut {
  /** X's live dots inside C seen so far: left out of removed(). */
  private readonly liveInSince = new CausalContext();

  constructor(
    private readonly keyCtx: CausalContext,
    private readonly since: CausalContext,
  ) {}

  /** The context the delta's entries are joined with: the key's context minus since. */
  context(): CausalContext {
    return this.keyCtx.subtract(this.since);
  }

  /** The delta's part of some of X's entries (each element's dots since lacks; elements without any left out). */
  entries(part: Iterable<[ElementKey, DotSet]>): Map<ElementKey, DotSet> {
    const out = new Map<ElementKey, DotSet>();
    for (const [k, dots] of part) {
      const fresh: Dot[] = [];
      for (const d of dots) {
        if (this.since.containsDot(d)) this.liveInSince.addDot(d);
        else fresh.push(d);
      }
      if (fresh.length > 0) out.set(k, fresh);
    }
    return out;
  }

  /** After every entry of X went through entries(): the dots inside since that X has seen and no longer holds. */
  removed(): CausalContext {
    return this.keyCtx.intersect(this.since).subtract(this.liveInSince);
  }
}

/** The whole delta of X since C in memory, as one state (the streamed delta joins to the same). */
export function deltaSince(x: AWSet, since: CausalContext): AWSet {
  const cut = new SinceCut(x.ctx, since);
  const entries = cut.entries(x.entries);
  return AWSet.fromParts(entries, cut.context().join(cut.removed()));
}
