// Offline checks of rendered Kubernetes manifests: schema validation (kubernetes-models), port
// ranges and names (which the schema misses), and the wiring between the StatefulSet, its
// ConfigMap, Services, probes and the node's DNS-based discovery. Every checker returns a list
// of problems; an empty list means the manifests pass.
import { spawnSync } from "node:child_process";
import * as yaml from "js-yaml";
import { StatefulSet } from "kubernetes-models/apps/v1";
import { ConfigMap, Namespace, Secret, Service } from "kubernetes-models/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1";

// Rendered YAML is untyped data; these checks walk it as plain JSON.
export type Json = any;

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: Json;
}

export interface Rendered {
  stdout: string;
  stderr: string;
}

/** `kubectl kustomize <dir>` (offline), with its warnings. Throws when kubectl fails. */
export function renderKustomize(dir: string): Rendered {
  const r = spawnSync("kubectl", ["kustomize", dir], { encoding: "utf8", timeout: 60_000 });
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`kubectl kustomize ${dir} exited ${r.status}: ${r.stderr}`);
  return { stdout: r.stdout, stderr: r.stderr };
}

/** Parse a multi-document YAML stream into objects (empty documents dropped). */
export function parseManifests(text: string): K8sObject[] {
  const docs = yaml.loadAll(text).filter((d) => d !== null && d !== undefined);
  for (const d of docs) {
    if (typeof d !== "object" || Array.isArray(d)) throw new Error(`not a Kubernetes object: ${JSON.stringify(d)}`);
  }
  return docs as K8sObject[];
}

interface Validatable {
  validate(): void;
}
type ModelClass = new (data: Json) => Validatable;

// Every kind the manifests may contain; anything else is reported, not silently skipped.
const MODELS: Record<string, ModelClass> = {
  "apps/v1/StatefulSet": StatefulSet,
  "v1/Service": Service,
  "v1/ConfigMap": ConfigMap,
  "v1/Secret": Secret,
  "v1/Namespace": Namespace,
  "policy/v1/PodDisruptionBudget": PodDisruptionBudget,
  "networking.k8s.io/v1/NetworkPolicy": NetworkPolicy,
};

export function objectLabel(o: K8sObject): string {
  return `${o.kind}/${o.metadata?.name ?? "?"}`;
}

/** Validate each object against the Kubernetes OpenAPI schema of its kind. */
export function schemaProblems(objects: K8sObject[]): string[] {
  const problems: string[] = [];
  for (const o of objects) {
    const model = MODELS[`${o.apiVersion}/${o.kind}`];
    if (!model) {
      problems.push(`${objectLabel(o)}: no schema model for apiVersion ${o.apiVersion}`);
      continue;
    }
    try {
      new model(structuredClone(o)).validate();
    } catch (e) {
      problems.push(`${objectLabel(o)}: ${(e as Error).message}`);
    }
  }
  return problems;
}

const INT_PORT_KEYS = new Set(["containerPort", "hostPort", "nodePort", "endPort"]);
const INT_OR_NAME_PORT_KEYS = new Set(["port", "targetPort"]);

/** An IANA service name, the only form a named port may take (Kubernetes IsValidPortName). */
export function isValidPortName(s: string): boolean {
  return s.length >= 1 && s.length <= 15 && /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/.test(s) && /[a-z]/.test(s) && !s.includes("--");
}

function isPortNumber(v: unknown): boolean {
  return typeof v === "number" && Number.isInteger(v) && v >= 1 && v <= 65535;
}

/**
 * Every port field anywhere in the objects is an integer in 1..65535, or, where Kubernetes
 * allows it, a valid port name. The schema models check only the type, not the range.
 */
export function portProblems(objects: K8sObject[]): string[] {
  const problems: string[] = [];
  const walk = (node: Json, path: string, where: string): void => {
    if (Array.isArray(node)) {
      node.forEach((v, i) => walk(v, `${path}[${i}]`, where));
      return;
    }
    if (node === null || typeof node !== "object") return;
    for (const [key, value] of Object.entries(node)) {
      const p = path ? `${path}.${key}` : key;
      // A gRPC probe's port and a Service's own port must be numbers; others may be names.
      const mustBeInt =
        INT_PORT_KEYS.has(key) || (key === "port" && (/\.grpc$/.test(path) || /^spec\.ports\[\d+\]$/.test(path)));
      if (INT_PORT_KEYS.has(key) || INT_OR_NAME_PORT_KEYS.has(key)) {
        if (typeof value === "string" && !mustBeInt) {
          if (!isValidPortName(value)) problems.push(`${where} ${p}: "${value}" is not a valid port name`);
        } else if (!isPortNumber(value)) {
          problems.push(`${where} ${p}: ${JSON.stringify(value)} is not a port number in 1..65535`);
        }
      } else {
        walk(value, p, where);
      }
    }
  };
  for (const o of objects) walk(o, "", objectLabel(o));
  return problems;
}

export function findObject(objects: K8sObject[], kind: string, name?: string): K8sObject | undefined {
  return objects.find((o) => o.kind === kind && (name === undefined || o.metadata?.name === name));
}

/** host:port → port number, or undefined when malformed. */
export function portOfAddress(address: string | undefined): number | undefined {
  if (address === undefined) return undefined;
  const m = /^(?:\[[^\]]*\]|[^:[\]]*):(\d{1,5})$/.exec(address);
  return m ? Number(m[1]) : undefined;
}

function selects(selector: Record<string, string> | undefined, labels: Record<string, string>): boolean {
  if (!selector || Object.keys(selector).length === 0) return false;
  return Object.entries(selector).every(([k, v]) => labels[k] === v);
}

interface EnvValue {
  value?: string;
  fieldPath?: string;
}

/**
 * The container's environment as the kubelet builds it: envFrom first, then env in order, each
 * $(VAR) expanded from variables defined before it. fieldRef values become symbols such as
 * {metadata.name}. Reports references to variables not defined earlier (they stay literal).
 */
export function containerEnv(container: Json, configMaps: Map<string, Record<string, string>>): { env: Map<string, string>; raw: Map<string, EnvValue>; problems: string[] } {
  const env = new Map<string, string>();
  const raw = new Map<string, EnvValue>();
  const problems: string[] = [];
  for (const from of container.envFrom ?? []) {
    const name = from.configMapRef?.name;
    if (name === undefined) continue;
    const data = configMaps.get(name);
    if (!data) {
      problems.push(`container ${container.name}: envFrom ConfigMap ${name} is not in the manifests`);
      continue;
    }
    for (const [k, v] of Object.entries(data)) {
      env.set(k, v);
      raw.set(k, { value: v });
    }
  }
  for (const e of container.env ?? []) {
    if (e.valueFrom?.fieldRef) {
      env.set(e.name, `{${e.valueFrom.fieldRef.fieldPath}}`);
      raw.set(e.name, { fieldPath: e.valueFrom.fieldRef.fieldPath });
      continue;
    }
    const value: string = e.value ?? "";
    const expanded = value.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (all: string, ref: string | undefined) => {
      if (ref === undefined) return "$";
      const v = env.get(ref);
      if (v === undefined) {
        problems.push(`container ${container.name}: ${e.name} refers to $(${ref}), which is not defined before it`);
        return all;
      }
      return v;
    });
    env.set(e.name, expanded);
    raw.set(e.name, { value });
  }
  return { env, raw, problems };
}

export interface WiringExpectations {
  /** Name of the node container. */
  container: string;
  /** uid of the image's USER. */
  uid: number;
  /** The node's drain time after SIGTERM, in seconds. */
  drainSeconds: number;
  /** The node's default --leave-timeout-ms, in s: after the drain it may ship this long before it leaves. */
  leaveSeconds: number;
}

export const NODE_EXPECTATIONS: WiringExpectations = { container: "deltaset", uid: 10001, drainSeconds: 20, leaveSeconds: 15 };

/** The StatefulSet, ConfigMap, Services, probes, PDB and NetworkPolicy fit together. */
export function wiringProblems(objects: K8sObject[], expect: WiringExpectations = NODE_EXPECTATIONS): string[] {
  const problems: string[] = [];
  const sts = findObject(objects, "StatefulSet");
  if (!sts) return ["no StatefulSet"];
  const ns = sts.metadata.namespace;
  const podTemplate = sts.spec?.template ?? {};
  const podLabels: Record<string, string> = podTemplate.metadata?.labels ?? {};
  const podSpec = podTemplate.spec ?? {};
  const c = (podSpec.containers ?? []).find((x: Json) => x.name === expect.container);
  if (!c) return [`StatefulSet has no container named ${expect.container}`];

  if (!selects(sts.spec.selector?.matchLabels, podLabels)) problems.push("StatefulSet selector does not match its pod template labels");
  if (sts.spec.podManagementPolicy !== "Parallel") problems.push("StatefulSet podManagementPolicy is not Parallel");
  if (podSpec.enableServiceLinks !== false) problems.push("enableServiceLinks is not false: Service variables would collide with DELTASET_*");

  // Container ports by name.
  const ports = new Map<string, number>();
  for (const p of c.ports ?? []) if (p.name) ports.set(p.name, p.containerPort);
  const grpcPort = ports.get("grpc");
  const metricsPort = ports.get("metrics");
  if (grpcPort === undefined) problems.push("node container has no port named grpc");
  if (metricsPort === undefined) problems.push("node container has no port named metrics");
  const resolve = (p: number | string | undefined): number | undefined => (typeof p === "string" ? ports.get(p) : p);

  // Environment: ConfigMaps from the same render.
  const configMaps = new Map<string, Record<string, string>>();
  for (const o of objects) if (o.kind === "ConfigMap" && o.metadata.namespace === ns) configMaps.set(o.metadata.name, o.data ?? {});
  const { env, raw, problems: envProblems } = containerEnv(c, configMaps);
  problems.push(...envProblems);

  const listen = env.get("DELTASET_LISTEN");
  if (portOfAddress(listen) !== grpcPort) problems.push(`DELTASET_LISTEN ${listen} does not use the grpc container port ${grpcPort}`);
  if (listen !== undefined && /^(127\.|localhost|\[::1\])/.test(listen)) problems.push(`DELTASET_LISTEN ${listen} is loopback: no other pod could connect`);
  const metricsListen = env.get("DELTASET_METRICS_LISTEN");
  if (portOfAddress(metricsListen) !== metricsPort) problems.push(`DELTASET_METRICS_LISTEN ${metricsListen} does not use the metrics container port ${metricsPort}`);
  // The node refuses a non-loopback metrics address unless told to expose it.
  if (metricsListen !== undefined && !/^(127\.|localhost|\[::1\])/.test(metricsListen) && !/^(1|true|yes|on)$/i.test(env.get("DELTASET_METRICS_EXPOSE") ?? "")) {
    problems.push(`DELTASET_METRICS_LISTEN ${metricsListen} is not loopback and DELTASET_METRICS_EXPOSE is not true: the node would refuse to start`);
  }
  const scrapePort = podTemplate.metadata?.annotations?.["prometheus.io/port"];
  if (scrapePort !== undefined && Number(scrapePort) !== metricsPort) problems.push(`prometheus.io/port ${scrapePort} is not the metrics port ${metricsPort}`);

  // Identity and discovery through the headless Service.
  if (raw.get("DELTASET_NODE_ID")?.fieldPath !== "metadata.name") problems.push("DELTASET_NODE_ID is not the pod name (fieldRef metadata.name)");
  const serviceName: string | undefined = sts.spec.serviceName;
  const headless = serviceName === undefined ? undefined : findObject(objects, "Service", serviceName);
  if (!headless) {
    problems.push(`StatefulSet serviceName ${serviceName} names no Service`);
  } else {
    if (headless.spec?.clusterIP !== "None") problems.push(`Service ${serviceName} is not headless (clusterIP None)`);
    if (headless.spec?.publishNotReadyAddresses !== true) problems.push(`Service ${serviceName} does not publish not-ready addresses`);
    if (headless.metadata.namespace !== ns) problems.push(`Service ${serviceName} is in namespace ${headless.metadata.namespace}, the StatefulSet in ${ns}`);
  }
  const nsSymbol = "{metadata.namespace}";
  const seeds = env.get("DELTASET_SEEDS_DNS");
  const wantSeeds = `${serviceName}.${nsSymbol}.svc.cluster.local:${grpcPort}`;
  if (seeds !== wantSeeds) problems.push(`DELTASET_SEEDS_DNS expands to ${seeds}, expected ${wantSeeds}`);
  const advertise = env.get("DELTASET_ADVERTISE");
  const wantAdvertise = `{metadata.name}.${serviceName}.${nsSymbol}.svc.cluster.local:${grpcPort}`;
  if (advertise !== wantAdvertise) problems.push(`DELTASET_ADVERTISE expands to ${advertise}, expected ${wantAdvertise}`);

  // Probes reach the serving port.
  for (const kind of ["startupProbe", "readinessProbe", "livenessProbe"]) {
    const probe = c[kind];
    if (!probe) {
      if (kind !== "startupProbe") problems.push(`node container has no ${kind}`);
      continue;
    }
    const port = resolve(probe.grpc?.port ?? probe.tcpSocket?.port ?? probe.httpGet?.port);
    if (port !== grpcPort) problems.push(`${kind} checks port ${port}, the node serves on ${grpcPort}`);
    // Readiness asks whether the node serves clients (""); startup and liveness whether the process
    // started ("liveness"): a node held for a key its seeds refuse must leave the Service, not restart.
    if (probe.grpc !== undefined && probe.grpc !== null) {
      const service = probe.grpc.service ?? "";
      const want = kind === "readinessProbe" ? "" : "liveness";
      if (service !== want) problems.push(`${kind} asks health service "${service}", expected "${want}"`);
    }
  }

  // Services route to ports the container has.
  for (const svc of objects.filter((o) => o.kind === "Service")) {
    if (!selects(svc.spec?.selector, podLabels)) {
      problems.push(`Service ${svc.metadata.name} selects no deltaset pods`);
      continue;
    }
    if (svc.metadata.namespace !== ns) problems.push(`Service ${svc.metadata.name} is not in the StatefulSet's namespace`);
    for (const sp of svc.spec.ports ?? []) {
      const target = resolve(sp.targetPort ?? sp.port);
      const known = (c.ports ?? []).some((p: Json) => p.containerPort === target);
      if (target === undefined || !known) problems.push(`Service ${svc.metadata.name} port ${sp.name ?? sp.port} targets ${sp.targetPort}, which the container does not expose`);
    }
  }
  const clientSvc = objects.find((o) => o.kind === "Service" && o.spec?.clusterIP !== "None");
  if (!clientSvc) problems.push("no client (non-headless) Service");

  // Storage: the data directory is a mounted volume claim; the rest of the root is read-only.
  const dataDir = env.get("DELTASET_DATA_DIR");
  const claims = new Set<string>((sts.spec.volumeClaimTemplates ?? []).map((v: Json) => v.metadata?.name));
  const mounts: Json[] = c.volumeMounts ?? [];
  const dataMount = mounts.find((m) => dataDir !== undefined && (dataDir === m.mountPath || dataDir.startsWith(`${m.mountPath}/`)));
  if (!dataMount || !claims.has(dataMount.name) || dataMount.readOnly) problems.push(`DELTASET_DATA_DIR ${dataDir} is not on a writable mount of a volumeClaimTemplate`);
  if (c.securityContext?.readOnlyRootFilesystem !== true) problems.push("node container root filesystem is not read-only");
  if (!mounts.some((m) => m.mountPath === "/tmp" && !m.readOnly)) problems.push("no writable /tmp (tsx keeps its cache there)");

  // Non-root, matching the image's USER.
  const runAsNonRoot = c.securityContext?.runAsNonRoot ?? podSpec.securityContext?.runAsNonRoot;
  if (runAsNonRoot !== true) problems.push("runAsNonRoot is not set");
  const uid = c.securityContext?.runAsUser ?? podSpec.securityContext?.runAsUser;
  if (uid !== expect.uid) problems.push(`runAsUser ${uid} is not the image's uid ${expect.uid}`);
  if (!c.resources?.requests || !c.resources?.limits) problems.push("node container has no resource requests and limits");

  const grace = podSpec.terminationGracePeriodSeconds;
  const stopping = expect.drainSeconds + expect.leaveSeconds;
  if (typeof grace !== "number" || grace <= stopping) problems.push(`terminationGracePeriodSeconds ${grace} leaves no margin over the ${expect.drainSeconds} s drain and ${expect.leaveSeconds} s leave`);

  const pdb = findObject(objects, "PodDisruptionBudget");
  if (!pdb) problems.push("no PodDisruptionBudget");
  else {
    if (!selects(pdb.spec?.selector?.matchLabels, podLabels)) problems.push("PodDisruptionBudget selects no deltaset pods");
    if (pdb.spec?.maxUnavailable !== 1) problems.push(`PodDisruptionBudget maxUnavailable is ${pdb.spec?.maxUnavailable}, expected 1`);
  }

  const np = findObject(objects, "NetworkPolicy");
  if (!np) problems.push("no NetworkPolicy");
  else {
    if (!selects(np.spec?.podSelector?.matchLabels, podLabels)) problems.push("NetworkPolicy selects no deltaset pods");
    const rules: Json[] = np.spec?.ingress ?? [];
    const allows = (port: number | undefined, fromPeers: boolean): boolean =>
      rules.some((r) => (r.ports ?? []).some((p: Json) => resolve(p.port) === port) && (!fromPeers || (r.from ?? []).some((f: Json) => selects(f.podSelector?.matchLabels, podLabels))));
    if (!allows(grpcPort, true)) problems.push(`NetworkPolicy does not let deltaset pods reach each other on ${grpcPort}`);
    if (!allows(metricsPort, false)) problems.push(`NetworkPolicy does not admit scrapes on ${metricsPort}`);
  }
  return problems;
}

function allContainers(podSpec: Json): Json[] {
  return [...(podSpec?.initContainers ?? []), ...(podSpec?.containers ?? [])];
}

export const TOXIPROXY_IMAGE = "ghcr.io/shopify/toxiproxy:2.12.0";

/** The chaos overlay: a Toxiproxy sidecar per pod and the node told to dial peers through it. */
export function chaosProblems(objects: K8sObject[]): string[] {
  const problems: string[] = [];
  const sts = findObject(objects, "StatefulSet");
  if (!sts) return ["no StatefulSet"];
  const podSpec = sts.spec.template.spec;
  const proxy = allContainers(podSpec).find((c) => c.image === TOXIPROXY_IMAGE);
  if (!proxy) return [`no ${TOXIPROXY_IMAGE} container in the pod`];
  const isInit = (podSpec.initContainers ?? []).includes(proxy);
  if (isInit && proxy.restartPolicy !== "Always") problems.push("Toxiproxy init container is not a sidecar (restartPolicy Always): it would block the pod");
  const args: string[] = proxy.args ?? [];
  const portArg = args.find((a) => a.startsWith("-port="));
  const apiPort = portArg ? Number(portArg.slice("-port=".length)) : 8474;
  const hostArg = args.find((a) => a.startsWith("-host="));
  const apiHost = hostArg ? hostArg.slice("-host=".length) : "localhost";
  if (!(proxy.ports ?? []).some((p: Json) => p.containerPort === apiPort)) problems.push(`Toxiproxy listens on ${apiPort} but declares no such container port`);
  const node = (podSpec.containers ?? []).find((c: Json) => c.name === NODE_EXPECTATIONS.container);
  const peerProxy = (node?.env ?? []).find((e: Json) => e.name === "DELTASET_PEER_PROXY")?.value;
  if (peerProxy === undefined) problems.push("node has no DELTASET_PEER_PROXY");
  else {
    if (portOfAddress(peerProxy) !== apiPort) problems.push(`DELTASET_PEER_PROXY ${peerProxy} is not the Toxiproxy API port ${apiPort}`);
    const host = peerProxy.slice(0, peerProxy.lastIndexOf(":"));
    const reachable = apiHost === "0.0.0.0" || host === apiHost || (apiHost === "localhost" && host === "127.0.0.1");
    if (!reachable) problems.push(`DELTASET_PEER_PROXY host ${host} cannot reach a Toxiproxy API bound to ${apiHost}`);
  }
  return problems;
}

/**
 * A Secret mounted as a directory in the node container (no subPath: an updated Secret reaches the
 * file), and each of the environment variables `envNames` naming one of its keys under the mount.
 */
export function secretFileProblems(objects: K8sObject[], secretName: string, secretKeys: string[], envNames: string[]): string[] {
  const problems: string[] = [];
  const sts = findObject(objects, "StatefulSet");
  if (!sts) return ["no StatefulSet"];
  const podSpec = sts.spec.template.spec;
  const vol = (podSpec.volumes ?? []).find((v: Json) => v.secret?.secretName === secretName);
  if (!vol) return [`no volume from Secret ${secretName}`];
  const node = (podSpec.containers ?? []).find((c: Json) => c.name === NODE_EXPECTATIONS.container);
  const mount = (node?.volumeMounts ?? []).find((m: Json) => m.name === vol.name);
  if (!mount) return [`Secret volume ${vol.name} is not mounted in the node container`];
  if (mount.subPath !== undefined) problems.push(`Secret volume ${vol.name} is mounted with subPath: updates of the Secret never reach the file`);
  const env = new Map<string, string>((node.env ?? []).map((e: Json) => [e.name, e.value]));
  for (const name of envNames) {
    const path = env.get(name);
    const file = path?.startsWith(`${mount.mountPath}/`) ? path.slice(mount.mountPath.length + 1) : undefined;
    if (file === undefined || !secretKeys.includes(file)) problems.push(`${name}=${path} is not a key of Secret ${secretName} under ${mount.mountPath}`);
  }
  return problems;
}

/** The TLS component: Secret mounted, DELTASET_TLS_* pointing at its files, no plaintext gRPC probes. */
export function tlsProblems(objects: K8sObject[], secretName: string, secretKeys: string[]): string[] {
  const problems = secretFileProblems(objects, secretName, secretKeys, ["DELTASET_TLS_CERT", "DELTASET_TLS_KEY", "DELTASET_TLS_CA"]);
  const sts = findObject(objects, "StatefulSet");
  const node = (sts?.spec.template.spec.containers ?? []).find((c: Json) => c.name === NODE_EXPECTATIONS.container);
  for (const kind of ["startupProbe", "readinessProbe", "livenessProbe"]) {
    if (node?.[kind]?.grpc) problems.push(`${kind} uses a gRPC probe, which speaks plaintext only and fails against a TLS port`);
  }
  // One Secret for every pod: mutual TLS would need each certificate to name its own node id.
  const env = new Map<string, string>((node?.env ?? []).map((e: Json) => [e.name, e.value]));
  if (env.has("DELTASET_TLS_CA") && !/^(0|false|no|off)$/i.test(env.get("DELTASET_TLS_MUTUAL") ?? "")) {
    problems.push("every pod mounts the same certificate but DELTASET_TLS_MUTUAL is not false: mutual TLS needs a certificate naming each node id, so peers would refuse each other");
  }
  return problems;
}
