// Registers the replicated probabilistic filters of seed 001 (GBF, GCF, ORCF and their scalable
// series) as replicated types: importing crdt/ makes them available to Merge, gossip and the store.
// Each type's keys hold siblings of its filters (filter-siblings.ts): one filter, or several when
// nodes created the key at once with different parameters.
import { cuckooTableBytes } from "./cuckoo-table.js";
import { type SiblingKind, siblingLattice } from "./filter-siblings.js";
import { type Gbf, GbfLattice, gbfBytes } from "./gbf.js";
import { type Gcf, GcfLattice } from "./gcf.js";
import { registerLattice } from "./lattice.js";
import { type Orcf, OrcfLattice } from "./orcf.js";
import { type ScGbf, ScGbfLattice, type ScGcf, ScGcfLattice, type ScOrcf, ScOrcfLattice, bloomSeriesBytes, cuckooSeriesBytes } from "./scalable-filter.js";

const bloom: SiblingKind<Gbf> = { params: (f) => f.params, bytes: (f) => gbfBytes(f.params!) };
const cuckoo: SiblingKind<Gcf | Orcf> = { params: (f) => f.params, bytes: (f) => cuckooTableBytes(f.params!) };
// A series is sized by its first sub-filter, as at its creation.
const bloomSeries: SiblingKind<ScGbf> = { params: (f) => f.params, bytes: (f) => bloomSeriesBytes(f.params!, 1) };
const cuckooSeries: SiblingKind<ScGcf | ScOrcf> = { params: (f) => f.params, bytes: (f) => cuckooSeriesBytes(f.params!, 1) };

export const GbfKeyLattice = siblingLattice(GbfLattice, bloom);
export const GcfKeyLattice = siblingLattice<Gcf>(GcfLattice, cuckoo);
export const OrcfKeyLattice = siblingLattice<Orcf>(OrcfLattice, cuckoo);
export const ScGbfKeyLattice = siblingLattice(ScGbfLattice, bloomSeries);
export const ScGcfKeyLattice = siblingLattice<ScGcf>(ScGcfLattice, cuckooSeries);
export const ScOrcfKeyLattice = siblingLattice<ScOrcf>(ScOrcfLattice, cuckooSeries);

/** The lattices the filter types are registered with (what the store, gossip and Merge use). */
export const FILTER_LATTICES = [GbfKeyLattice, GcfKeyLattice, OrcfKeyLattice, ScGbfKeyLattice, ScGcfKeyLattice, ScOrcfKeyLattice] as const;

for (const l of FILTER_LATTICES) registerLattice(l as never);
