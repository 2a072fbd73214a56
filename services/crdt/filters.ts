// Registers the replicated probabilistic filters of seed 001 (GBF, GCF, ORCF and their scalable
// series) as replicated types: importing crdt/ makes them available to Merge, gossip and the store.
import { GbfLattice } from "./gbf.js";
import { GcfLattice } from "./gcf.js";
import { registerLattice } from "./lattice.js";
import { OrcfLattice } from "./orcf.js";
import { ScGbfLattice, ScGcfLattice, ScOrcfLattice } from "./scalable-filter.js";

export const FILTER_LATTICES = [GbfLattice, GcfLattice, OrcfLattice, ScGbfLattice, ScGcfLattice, ScOrcfLattice] as const;

for (const l of FILTER_LATTICES) registerLattice(l as never);
