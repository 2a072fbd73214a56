// Checks that the grpcurl examples in the operator guide match the .proto files: services and
// methods exist, request JSON uses the proto3 JSON names grpcurl prints (lowerCamelCase), bytes
// are base64, enums are value names, and example responses have the shape of the reply type.
import * as protoLoader from "@grpc/proto-loader";
import { protoPath as healthProtoPath } from "grpc-health-check";

type Json = unknown;

interface FieldDescriptor {
  name: string;
  label: string;
  type: string;
  typeName: string;
}
interface MessageDescriptor {
  name: string;
  field: FieldDescriptor[];
  nestedType?: MessageDescriptor[];
  enumType?: EnumDescriptor[];
}
interface EnumDescriptor {
  name: string;
  value: { name: string; number: number }[];
}

export interface ProtoIndex {
  messages: Map<string, MessageDescriptor>;
  enums: Map<string, EnumDescriptor>;
  /** "pkg.Service/Method" → request and response type names, streaming flags. */
  methods: Map<string, { request: string; response: string; responseStream: boolean }>;
  services: Set<string>;
}

/** Load the project's protos and the standard health proto into a name index. */
export function loadProtoIndex(protoRoot: string, files: string[]): ProtoIndex {
  const def = protoLoader.loadSync([...files, healthProtoPath], { includeDirs: [protoRoot], keepCase: true });
  const index: ProtoIndex = { messages: new Map(), enums: new Map(), methods: new Map(), services: new Set() };
  const addNested = (full: string, m: MessageDescriptor): void => {
    index.messages.set(full, m);
    for (const e of m.enumType ?? []) index.enums.set(`${full}.${e.name}`, e);
    for (const n of m.nestedType ?? []) addNested(`${full}.${n.name}`, n);
  };
  const methodTypes: { key: string; pkg: string; request: string; response: string; responseStream: boolean }[] = [];
  for (const [name, entry] of Object.entries(def)) {
    const e = entry as { format?: string; type?: unknown };
    if (e.format === "Protocol Buffer 3 DescriptorProto") addNested(name, e.type as MessageDescriptor);
    else if (e.format === "Protocol Buffer 3 EnumDescriptorProto") index.enums.set(name, e.type as EnumDescriptor);
    else {
      index.services.add(name);
      for (const [method, m] of Object.entries(entry as Record<string, protoLoader.MethodDefinition<unknown, unknown>>)) {
        const req = m.requestType as unknown as { type: MessageDescriptor };
        const res = m.responseType as unknown as { type: MessageDescriptor };
        const pkg = name.slice(0, name.lastIndexOf("."));
        methodTypes.push({ key: `${name}/${method}`, pkg, request: req.type.name, response: res.type.name, responseStream: m.responseStream });
      }
    }
  }
  // Method definitions carry short type names: prefer the service's package, else a unique match.
  const qualify = (pkg: string, short: string): string => {
    if (index.messages.has(`${pkg}.${short}`)) return `${pkg}.${short}`;
    const matches = [...index.messages.keys()].filter((k) => k.endsWith(`.${short}`));
    return matches.length === 1 ? matches[0] : `${pkg}.${short}`;
  };
  for (const m of methodTypes) {
    index.methods.set(m.key, { request: qualify(m.pkg, m.request), response: qualify(m.pkg, m.response), responseStream: m.responseStream });
  }
  return index;
}

/** protoc's JSON name: drop underscores, upper-case the letter after each. */
export function jsonName(protoName: string): string {
  return protoName.replace(/_+([a-zA-Z0-9])/g, (_, ch: string) => ch.toUpperCase());
}

function resolveType(index: ProtoIndex, scope: string, typeName: string, kind: "message" | "enum"): string | undefined {
  const map = kind === "message" ? index.messages : index.enums;
  const name = typeName.replace(/^\./, "");
  // Search from the innermost scope outwards, as protoc does.
  const parts = scope.split(".");
  for (let n = parts.length; n >= 0; n--) {
    const candidate = [...parts.slice(0, n), name].join(".");
    if (map.has(candidate)) return candidate;
  }
  return undefined;
}

const INT32 = new Set(["TYPE_INT32", "TYPE_UINT32", "TYPE_SINT32", "TYPE_FIXED32", "TYPE_SFIXED32"]);
const INT64 = new Set(["TYPE_INT64", "TYPE_UINT64", "TYPE_SINT64", "TYPE_FIXED64", "TYPE_SFIXED64"]);

export function isBase64(s: string): boolean {
  return s.length % 4 === 0 && /^[A-Za-z0-9+/]*={0,2}$/.test(s);
}

/**
 * Problems of a JSON value against a message type. `printed` is true for responses: grpcurl
 * prints 64-bit integers as strings and enums as names; requests may also use numbers.
 */
export function messageJsonProblems(index: ProtoIndex, typeName: string, value: Json, printed: boolean, path = "$"): string[] {
  const msg = index.messages.get(typeName);
  if (!msg) return [`${path}: unknown message type ${typeName}`];
  if (value === null || typeof value !== "object" || Array.isArray(value)) return [`${path}: expected an object for ${typeName}`];
  const problems: string[] = [];
  const byJson = new Map(msg.field.map((f) => [jsonName(f.name), f]));
  for (const [key, v] of Object.entries(value as Record<string, Json>)) {
    const field = byJson.get(key);
    if (!field) {
      const snake = msg.field.find((f) => f.name === key);
      problems.push(snake ? `${path}.${key}: grpcurl uses the JSON name ${jsonName(key)}` : `${path}.${key}: ${typeName} has no field ${key}`);
      continue;
    }
    const items = field.label === "LABEL_REPEATED" ? (Array.isArray(v) ? v : null) : [v];
    if (items === null) {
      problems.push(`${path}.${key}: repeated field needs an array`);
      continue;
    }
    items.forEach((item, i) => {
      const p = field.label === "LABEL_REPEATED" ? `${path}.${key}[${i}]` : `${path}.${key}`;
      problems.push(...scalarProblems(index, typeName, field, item, printed, p));
    });
  }
  return problems;
}

function scalarProblems(index: ProtoIndex, scope: string, field: FieldDescriptor, v: Json, printed: boolean, p: string): string[] {
  const t = field.type;
  if (t === "TYPE_MESSAGE") {
    const name = resolveType(index, scope, field.typeName, "message");
    return name ? messageJsonProblems(index, name, v, printed, p) : [`${p}: cannot resolve ${field.typeName}`];
  }
  if (t === "TYPE_ENUM") {
    const name = resolveType(index, scope, field.typeName, "enum");
    const e = name ? index.enums.get(name) : undefined;
    if (!e) return [`${p}: cannot resolve enum ${field.typeName}`];
    if (typeof v === "string") return e.value.some((x) => x.name === v) ? [] : [`${p}: ${v} is not a value of ${e.name}`];
    if (!printed && typeof v === "number" && e.value.some((x) => x.number === v)) return [];
    return [`${p}: enum ${e.name} needs a value name`];
  }
  if (t === "TYPE_BYTES") return typeof v === "string" && isBase64(v) ? [] : [`${p}: bytes must be a base64 string`];
  if (t === "TYPE_STRING") return typeof v === "string" ? [] : [`${p}: expected a string`];
  if (t === "TYPE_BOOL") return typeof v === "boolean" ? [] : [`${p}: expected true or false`];
  if (INT32.has(t)) return typeof v === "number" && Number.isInteger(v) ? [] : [`${p}: expected an integer number`];
  if (INT64.has(t)) {
    if (typeof v === "string" && /^-?\d+$/.test(v)) return [];
    if (!printed && typeof v === "number" && Number.isInteger(v)) return [];
    return [`${p}: a 64-bit integer is ${printed ? "printed as a decimal string" : "an integer or decimal string"}`];
  }
  if (t === "TYPE_DOUBLE" || t === "TYPE_FLOAT") return typeof v === "number" ? [] : [`${p}: expected a number`];
  return [`${p}: unsupported field type ${t}`];
}

/** Split a shell command line into words (single and double quotes, backslash escapes). */
export function shellWords(line: string): string[] {
  const words: string[] = [];
  let cur = "";
  let inWord = false;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i];
    if (ch === "'") {
      const end = line.indexOf("'", i + 1);
      if (end < 0) throw new Error(`unterminated ' in: ${line}`);
      cur += line.slice(i + 1, end);
      i = end;
      inWord = true;
    } else if (ch === '"') {
      let j = i + 1;
      while (j < line.length && line[j] !== '"') {
        if (line[j] === "\\" && j + 1 < line.length) j++;
        cur += line[j];
        j++;
      }
      if (j >= line.length) throw new Error(`unterminated " in: ${line}`);
      i = j;
      inWord = true;
    } else if (ch === "\\" && i + 1 < line.length) {
      cur += line[++i];
      inWord = true;
    } else if (/\s/.test(ch)) {
      if (inWord) words.push(cur);
      cur = "";
      inWord = false;
    } else if (ch === "#" && !inWord) {
      break;
    } else {
      cur += ch;
      inWord = true;
    }
  }
  if (inWord) words.push(cur);
  return words;
}

export interface GrpcurlCall {
  line: string;
  data?: string;
  verb: "list" | "describe" | "call";
  symbol?: string;
}

const FLAGS_WITH_VALUE = new Set(["-d", "-H", "-rpc-header", "-reflect-header", "-cacert", "-cert", "-key", "-authority", "-servername", "-proto", "-import-path", "-protoset", "-max-time", "-connect-timeout", "-keepalive-time", "-max-msg-sz", "-format", "-user-agent"]);

/** grpcurl invocations in the markdown's shell code blocks. */
export function grpcurlCalls(markdown: string): GrpcurlCall[] {
  const calls: GrpcurlCall[] = [];
  const blocks = markdown.matchAll(/```(?:bash|sh|shell|console)\n([\s\S]*?)```/g);
  for (const [, body] of blocks) {
    const lines = body.replace(/\\\n\s*/g, " ").split("\n");
    for (const raw of lines) {
      const line = raw.replace(/^\$\s+/, "").trim();
      // grpcurl may follow a pipe or an env assignment; take the words from "grpcurl" on.
      const words = shellWords(line);
      const at = words.indexOf("grpcurl");
      if (at < 0) continue;
      const rest = words.slice(at + 1);
      const positional: string[] = [];
      let data: string | undefined;
      for (let i = 0; i < rest.length; i++) {
        const w = rest[i];
        if (w === "|" || w === ";" || w === "&&") break;
        if (w.startsWith("-")) {
          const flag = w.replace(/^--/, "-").split("=")[0];
          const inline = w.includes("=") ? w.slice(w.indexOf("=") + 1) : undefined;
          const value = FLAGS_WITH_VALUE.has(flag) ? (inline ?? rest[++i]) : undefined;
          if (flag === "-d") data = value;
          continue;
        }
        positional.push(w);
      }
      // positional: [address, verb-or-method, symbol?]
      const [, second, third] = positional;
      if (second === "list" || second === "describe") calls.push({ line, data, verb: second, symbol: third });
      else calls.push({ line, data, verb: "call", symbol: second });
    }
  }
  return calls;
}

/** Example responses, marked in the markdown by a comment line before a json code block. */
export function responseExamples(markdown: string): { method: string; json: string }[] {
  const out: { method: string; json: string }[] = [];
  for (const m of markdown.matchAll(/<!--\s*grpcurl-response:\s*(\S+)\s*-->\s*\n```json\n([\s\S]*?)```/g)) out.push({ method: m[1], json: m[2] });
  return out;
}

/** Parse one or more concatenated JSON objects, as grpcurl prints a server stream. */
export function parseJsonStream(text: string): Json[] {
  const values: Json[] = [];
  let depth = 0;
  let start = -1;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (inString) {
      if (ch === "\\") i++;
      else if (ch === '"') inString = false;
      continue;
    }
    if (ch === '"') inString = true;
    else if (ch === "{") {
      if (depth === 0) start = i;
      depth++;
    } else if (ch === "}") {
      depth--;
      if (depth === 0) values.push(JSON.parse(text.slice(start, i + 1)));
    }
  }
  if (depth !== 0) throw new Error("unbalanced braces in JSON example");
  return values;
}

function knownSymbol(index: ProtoIndex, symbol: string): boolean {
  if (index.services.has(symbol) || index.messages.has(symbol) || index.enums.has(symbol)) return true;
  const dot = symbol.lastIndexOf(".");
  return dot > 0 && index.methods.has(`${symbol.slice(0, dot)}/${symbol.slice(dot + 1)}`);
}

/** Every grpcurl example and example response in the markdown agrees with the protos. */
export function grpcurlDocProblems(markdown: string, index: ProtoIndex): string[] {
  const problems: string[] = [];
  for (const call of grpcurlCalls(markdown)) {
    if (call.verb !== "call") {
      if (call.symbol !== undefined && !knownSymbol(index, call.symbol)) problems.push(`${call.line}: unknown symbol ${call.symbol}`);
      continue;
    }
    const method = call.symbol === undefined ? undefined : index.methods.get(call.symbol);
    if (!method) {
      problems.push(`${call.line}: unknown method ${call.symbol} (write it as package.Service/Method)`);
      continue;
    }
    if (call.data === undefined || call.data.startsWith("@")) continue;
    let body: Json;
    try {
      body = JSON.parse(call.data);
    } catch (e) {
      problems.push(`${call.line}: -d is not JSON: ${(e as Error).message}`);
      continue;
    }
    problems.push(...messageJsonProblems(index, method.request, body, false).map((p) => `${call.symbol} request ${p}`));
  }
  for (const ex of responseExamples(markdown)) {
    const method = index.methods.get(ex.method);
    if (!method) {
      problems.push(`response example: unknown method ${ex.method}`);
      continue;
    }
    let values: Json[];
    try {
      values = parseJsonStream(ex.json);
    } catch (e) {
      problems.push(`${ex.method} response example: ${(e as Error).message}`);
      continue;
    }
    if (values.length === 0) problems.push(`${ex.method} response example is empty`);
    if (values.length > 1 && !method.responseStream) problems.push(`${ex.method} response example has ${values.length} messages but the method is unary`);
    for (const v of values) problems.push(...messageJsonProblems(index, method.response, v, true).map((p) => `${ex.method} response ${p}`));
  }
  return problems;
}
