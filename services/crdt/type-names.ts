// The short names of the object types, as the CLI's --type and the node's --key-types take them
// (lower case; the proto spells the same types AWSET, AWSET_PROB, GBF...).
import { ObjectType } from "./lattice.js";

export const TYPE_BY_NAME: Readonly<Record<string, ObjectType>> = {
  awset: ObjectType.AWSET,
  "awset-prob": ObjectType.AWSET_PROB,
  gbf: ObjectType.GBF,
  gcf: ObjectType.GCF,
  orcf: ObjectType.ORCF,
  scgbf: ObjectType.SCGBF,
  scgcf: ObjectType.SCGCF,
  scorcf: ObjectType.SCORCF,
  counter: ObjectType.COUNTER,
};
