// Toxic descriptions as the API sees them: parsing a create or update body, defaults, and the JSON
// shape. Pure: no I/O, no clock. Field order in JSON follows Toxiproxy (attributes, name, type,
// stream, toxicity) and every attribute of a type is always present (0 when not given).

import {
  ErrBadRequestBody,
  ErrInvalidStream,
  ErrInvalidToxicType,
  ErrToxicAlreadyExists,
} from "./api-error.js";

export type Direction = "upstream" | "downstream";

/** Attribute names per toxic type, in Toxiproxy's order. "noop" exists upstream too: a pass-through. */
export const TOXIC_ATTRIBUTES = {
  latency: ["latency", "jitter"],
  bandwidth: ["rate"],
  slow_close: ["delay"],
  timeout: ["timeout"],
  reset_peer: ["timeout"],
  slicer: ["average_size", "size_variation", "delay"],
  limit_data: ["bytes"],
  noop: [],
} as const satisfies Record<string, readonly string[]>;

export type ToxicType = keyof typeof TOXIC_ATTRIBUTES;

export interface ToxicSpec {
  readonly name: string;
  readonly type: ToxicType;
  /** The stream as the request spelled it (Toxiproxy keeps the spelling, matches case-insensitively). */
  readonly stream: string;
  readonly direction: Direction;
  readonly toxicity: number;
  readonly attributes: Readonly<Record<string, number>>;
}

export interface ToxicJson {
  attributes: Record<string, number>;
  name: string;
  type: string;
  stream: string;
  toxicity: number;
}

export function isToxicType(value: string): value is ToxicType {
  return Object.prototype.hasOwnProperty.call(TOXIC_ATTRIBUTES, value);
}

export function parseDirection(stream: string): Direction | undefined {
  const lower = stream.toLowerCase();
  return lower === "upstream" || lower === "downstream" ? lower : undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function optionalString(body: Record<string, unknown>, key: string): string | undefined {
  const value = body[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string") throw ErrBadRequestBody.withDetail(`field ${key} must be a string`);
  return value;
}

function optionalNumber(body: Record<string, unknown>, key: string): number | undefined {
  const value = body[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number") throw ErrBadRequestBody.withDetail(`field ${key} must be a number`);
  return value;
}

/** Reads the attributes of `type` from `raw`, starting from `base` (absent or null keys keep it). */
function readAttributes(
  type: ToxicType,
  raw: unknown,
  base: Readonly<Record<string, number>>,
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const key of TOXIC_ATTRIBUTES[type]) out[key] = base[key] ?? 0;
  if (raw === undefined || raw === null) return out;
  if (!isObject(raw)) throw ErrBadRequestBody.withDetail("field attributes must be an object");
  for (const key of TOXIC_ATTRIBUTES[type]) {
    const value = raw[key];
    if (value === undefined || value === null) continue;
    if (typeof value !== "number" || !Number.isSafeInteger(value)) {
      throw ErrBadRequestBody.withDetail(`attribute ${key} must be an integer`);
    }
    out[key] = value;
  }
  return out;
}

/**
 * A new toxic from a POST body (already JSON-parsed). Checks run in Toxiproxy's order: body shape,
 * stream, default name, type; `exists` is asked before the attributes are read, so a duplicate name
 * wins over bad attributes as it does upstream.
 */
export function parseNewToxic(body: unknown, exists: (name: string) => boolean): ToxicSpec {
  if (!isObject(body)) throw ErrBadRequestBody.withDetail("expected a JSON object");
  const givenName = optionalString(body, "name") ?? "";
  const type = optionalString(body, "type") ?? "";
  const stream = optionalString(body, "stream") ?? "downstream";
  const toxicity = optionalNumber(body, "toxicity") ?? 1.0;
  const direction = parseDirection(stream);
  if (direction === undefined) throw ErrInvalidStream;
  const name = givenName === "" ? `${type}_${stream}` : givenName;
  if (!isToxicType(type)) throw ErrInvalidToxicType;
  if (exists(name)) throw ErrToxicAlreadyExists;
  const attributes = readAttributes(type, body.attributes, {});
  return { name, type, stream, direction, toxicity, attributes };
}

/** An update (POST/PATCH body) applied to an existing toxic: only attributes and toxicity change. */
export function applyToxicUpdate(existing: ToxicSpec, body: unknown): ToxicSpec {
  if (!isObject(body)) throw ErrBadRequestBody.withDetail("expected a JSON object");
  const toxicity = optionalNumber(body, "toxicity") ?? existing.toxicity;
  const attributes = readAttributes(existing.type, body.attributes, existing.attributes);
  return { ...existing, toxicity, attributes };
}

export function toxicJson(spec: ToxicSpec): ToxicJson {
  return {
    attributes: { ...spec.attributes },
    name: spec.name,
    type: spec.type,
    stream: spec.stream,
    toxicity: spec.toxicity,
  };
}
