// Renders the kustomize base and every overlay offline and checks the result: schema, ports,
// and the wiring between the StatefulSet, ConfigMap, Services, probes and DNS discovery.
// Each checker is also fed a deliberately broken input to show that it can fail.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import * as yaml from "js-yaml";
import { loadConfig } from "../../services/node/config.js";
import {
  chaosProblems,
  containerEnv,
  findObject,
  parseManifests,
  portProblems,
  renderKustomize,
  schemaProblems,
  secretFileProblems,
  tlsProblems,
  wiringProblems,
  type K8sObject,
} from "./k8s-manifest-checks.js";

const ROOT = join(import.meta.dirname, "..", "..");
const K8S = join(ROOT, "k8s");
const OVERLAYS = readdirSync(join(K8S, "overlays")).filter((d) => statSync(join(K8S, "overlays", d)).isDirectory()).sort();
const TARGETS = ["base", ...OVERLAYS.map((d) => `overlays/${d}`)];

const renders = new Map<string, { objects: K8sObject[]; stderr: string }>();
function rendered(target: string): K8sObject[] {
  return render(target).objects;
}
function render(target: string): { objects: K8sObject[]; stderr: string } {
  let r = renders.get(target);
  if (!r) {
    const out = renderKustomize(join(K8S, target));
    r = { objects: parseManifests(out.stdout), stderr: out.stderr };
    renders.set(target, r);
  }
  return r;
}

function mutated(objects: K8sObject[], change: (objs: K8sObject[]) => void): K8sObject[] {
  const copy = structuredClone(objects);
  change(copy);
  return copy;
}
function sts(objs: K8sObject[]): K8sObject {
  const s = findObject(objs, "StatefulSet");
  assert.ok(s, "StatefulSet present");
  return s;
}
function nodeContainer(objs: K8sObject[]) {
  return sts(objs).spec.template.spec.containers.find((c: { name: string }) => c.name === "deltaset");
}
function envEntry(objs: K8sObject[], name: string) {
  return nodeContainer(objs).env.find((e: { name: string }) => e.name === name);
}
/** The node container's environment in pod <name>-0, as the kubelet would set it. */
function podEnvironment(objs: K8sObject[]): Record<string, string> {
  const s = sts(objs);
  const configMaps = new Map(objs.filter((o) => o.kind === "ConfigMap").map((o) => [o.metadata.name, o.data ?? {}]));
  const { env, problems } = containerEnv(nodeContainer(objs), configMaps);
  assert.deepEqual(problems, []);
  const pod = `${s.metadata.name}-0`;
  const ns = s.metadata.namespace ?? "default";
  const out: Record<string, string> = {};
  for (const [k, v] of env) out[k] = v.replaceAll("{metadata.name}", pod).replaceAll("{metadata.namespace}", ns);
  return out;
}

function assertReports(problems: string[], pattern: RegExp): void {
  assert.ok(problems.some((p) => pattern.test(p)), `expected a problem matching ${pattern}, got ${JSON.stringify(problems)}`);
}

test("the overlays expected by the docs and scripts exist", () => {
  for (const o of ["kind", "chaos", "kind-tls"]) assert.ok(OVERLAYS.includes(o), `k8s/overlays/${o}`);
});

for (const target of TARGETS) {
  test(`${target}: kubectl kustomize renders without warnings`, () => {
    const { objects, stderr } = render(target);
    assert.equal(stderr.trim(), "", "kustomize printed warnings");
    assert.ok(objects.length >= 6, `only ${objects.length} objects`);
  });

  test(`${target}: every object validates against the Kubernetes schema`, () => {
    assert.deepEqual(schemaProblems(rendered(target)), []);
  });

  test(`${target}: every port is an integer in 1..65535 or a valid port name`, () => {
    assert.deepEqual(portProblems(rendered(target)), []);
  });

  test(`${target}: StatefulSet, ConfigMap, Services, probes and discovery agree`, () => {
    assert.deepEqual(wiringProblems(rendered(target)), []);
  });

  test(`${target}: the node's config loader accepts the pod environment`, () => {
    const objs = rendered(target);
    const ns = sts(objs).metadata.namespace ?? "default";
    const config = loadConfig({}, podEnvironment(objs));
    assert.equal(config.listen, "0.0.0.0:7070");
    // Without a tokens file a node on 0.0.0.0 starts only when told the client API is open on purpose.
    assert.ok(config.authTokensFile !== undefined || config.insecureClients, "neither client tokens nor DELTASET_INSECURE_CLIENTS");
    assert.equal(config.nodeId, "deltaset-0");
    assert.equal(config.advertise, `deltaset-0.deltaset-peers.${ns}.svc.cluster.local:7070`);
    assert.equal(config.seedsDns, `deltaset-peers.${ns}.svc.cluster.local:7070`);
    assert.equal(config.dataDir, "/var/lib/deltaset/data");
    assert.equal(config.metricsListen, "0.0.0.0:9464");
    assert.equal(config.cluster, "deltaset");
    const scaled = target === "overlays/kind-scale";
    assert.equal(config.partitions, scaled ? 256 : 64);
    assert.equal(config.replicationFactor, scaled ? "3" : "all");
    if (scaled) assert.equal(sts(objs).spec.replicas, 9);
    assert.equal(config.peerProxy, target === "overlays/chaos" ? "127.0.0.1:8474" : undefined);
    const tls = target === "overlays/kind-tls";
    assert.deepEqual(config.tls, tls ? { cert: "/etc/deltaset/tls/tls.crt", key: "/etc/deltaset/tls/tls.key", ca: "/etc/deltaset/tls/ca.crt", mutual: false } : {});
  });

  test(`${target}: the node image is deltaset:dev`, () => {
    assert.equal(nodeContainer(rendered(target)).image, "deltaset:dev");
  });
}

test("base: namespace-agnostic, with the expected objects", () => {
  const objs = rendered("base");
  assert.deepEqual(objs.filter((o) => o.metadata.namespace !== undefined).map((o) => o.metadata.name), []);
  assert.equal(findObject(objs, "Namespace"), undefined);
  const kinds = objs.map((o) => `${o.kind}/${o.metadata.name}`).sort();
  assert.deepEqual(
    kinds.map((k) => k.replace(/-[a-z0-9]{10}$/, "-<hash>")),
    ["ConfigMap/deltaset-config-<hash>", "NetworkPolicy/deltaset", "PodDisruptionBudget/deltaset", "Service/deltaset", "Service/deltaset-peers", "StatefulSet/deltaset"],
  );
  const s = sts(objs);
  assert.equal(s.spec.serviceName, "deltaset-peers");
  assert.equal(s.spec.template.spec.terminationGracePeriodSeconds, 45);
  assert.deepEqual(s.spec.volumeClaimTemplates.map((v: { metadata: { name: string } }) => v.metadata.name), ["data"]);
  const cm = findObject(objs, "ConfigMap");
  assert.deepEqual(Object.keys(cm?.data ?? {}).sort(), ["DELTASET_CLUSTER", "DELTASET_DATA_DIR", "DELTASET_INSECURE_CLIENTS", "DELTASET_LISTEN", "DELTASET_METRICS_EXPOSE", "DELTASET_METRICS_LISTEN", "DELTASET_PARTITIONS"]);
  assert.equal(cm?.data.DELTASET_LISTEN, "0.0.0.0:7070");
  assert.equal(cm?.data.DELTASET_METRICS_LISTEN, "0.0.0.0:9464");
  assert.equal(cm?.data.DELTASET_DATA_DIR, "/var/lib/deltaset/data");
});

test("kind: three replicas in namespace deltaset, with the Namespace object", () => {
  const objs = rendered("overlays/kind");
  assert.equal(sts(objs).spec.replicas, 3);
  assert.ok(findObject(objs, "Namespace", "deltaset"));
  for (const o of objs.filter((x) => x.kind !== "Namespace")) assert.equal(o.metadata.namespace, "deltaset", `${o.kind}/${o.metadata.name}`);
  // Smaller than the base.
  assert.equal(nodeContainer(objs).resources.limits.memory, "384Mi");
  assert.equal(sts(objs).spec.volumeClaimTemplates[0].spec.resources.requests.storage, "256Mi");
});

test("chaos: a Toxiproxy sidecar in every pod and DELTASET_PEER_PROXY on the node", () => {
  const objs = rendered("overlays/chaos");
  assert.deepEqual(chaosProblems(objs), []);
  assert.equal(envEntry(objs, "DELTASET_PEER_PROXY")?.value, "127.0.0.1:8474");
  // The plain kind overlay has no sidecar: the checker must notice.
  assertReports(chaosProblems(rendered("overlays/kind")), /no ghcr\.io\/shopify\/toxiproxy:2\.12\.0 container/);
});

test("chaos checker: wrong API port, unreachable host, non-sidecar init container", () => {
  const objs = rendered("overlays/chaos");
  assertReports(chaosProblems(mutated(objs, (o) => (envEntry(o, "DELTASET_PEER_PROXY").value = "127.0.0.1:8475"))), /not the Toxiproxy API port 8474/);
  assertReports(chaosProblems(mutated(objs, (o) => (envEntry(o, "DELTASET_PEER_PROXY").value = "10.0.0.1:8474"))), /cannot reach a Toxiproxy API bound to 127\.0\.0\.1/);
  assertReports(chaosProblems(mutated(objs, (o) => delete sts(o).spec.template.spec.initContainers[0].restartPolicy)), /not a sidecar/);
  assertReports(chaosProblems(mutated(objs, (o) => (envEntry(o, "DELTASET_PEER_PROXY").name = "DELTASET_PEER_PROXI"))), /no DELTASET_PEER_PROXY/);
});

test("kind-tls: the Secret is mounted and DELTASET_TLS_* name its keys", () => {
  const example = yaml.load(readFileSync(join(K8S, "components", "tls", "secret.example.yaml"), "utf8")) as K8sObject;
  assert.deepEqual(schemaProblems([example]), []);
  const keys = Object.keys(example.stringData ?? example.data ?? {});
  assert.deepEqual(keys.sort(), ["ca.crt", "tls.crt", "tls.key"]);
  assert.deepEqual(tlsProblems(rendered("overlays/kind-tls"), example.metadata.name, keys), []);
  // Without the component: no Secret volume, and plaintext gRPC probes.
  assertReports(tlsProblems(rendered("overlays/kind"), example.metadata.name, keys), /no volume from Secret deltaset-tls/);
  const grpcProbe = mutated(rendered("overlays/kind-tls"), (o) => (nodeContainer(o).readinessProbe = { grpc: { port: 7070 } }));
  assertReports(tlsProblems(grpcProbe, example.metadata.name, keys), /readinessProbe uses a gRPC probe/);
  const wrongKey = mutated(rendered("overlays/kind-tls"), (o) => (envEntry(o, "DELTASET_TLS_CA").value = "/etc/deltaset/tls/ca.pem"));
  assertReports(tlsProblems(wrongKey, example.metadata.name, keys), /DELTASET_TLS_CA=\/etc\/deltaset\/tls\/ca\.pem is not a key/);
  // A shared certificate cannot name every node id: mutual TLS would make the peers refuse each other.
  const mutual = mutated(rendered("overlays/kind-tls"), (o) => (envEntry(o, "DELTASET_TLS_MUTUAL").value = "true"));
  assertReports(tlsProblems(mutual, example.metadata.name, keys), /DELTASET_TLS_MUTUAL is not false/);
});

test("every target mounts the cluster key Secret and points DELTASET_CLUSTER_KEY_FILE at it", () => {
  const example = yaml.load(readFileSync(join(K8S, "base", "cluster-key.example.yaml"), "utf8")) as K8sObject;
  assert.deepEqual(schemaProblems([example]), []);
  const keys = Object.keys(example.stringData ?? {});
  assert.deepEqual(keys, ["cluster.key"]);
  for (const target of TARGETS) {
    assert.deepEqual(secretFileProblems(rendered(target), example.metadata.name, keys, ["DELTASET_CLUSTER_KEY_FILE"]), [], target);
    // The rendered environment is a configuration the node accepts, naming the key file.
    assert.equal(podEnvironment(rendered(target)).DELTASET_CLUSTER_KEY_FILE, "/etc/deltaset/cluster-key/cluster.key");
  }
  // The base does not ship a key: a Secret in the manifests would be the same key for everyone.
  assert.equal(rendered("base").filter((o) => o.kind === "Secret").length, 0);
  const subPath = mutated(rendered("base"), (o) => (nodeContainer(o).volumeMounts.find((m: { name: string }) => m.name === "cluster-key").subPath = "cluster.key"));
  assertReports(secretFileProblems(subPath, example.metadata.name, keys, ["DELTASET_CLUSTER_KEY_FILE"]), /subPath/);
  const wrong = mutated(rendered("base"), (o) => (envEntry(o, "DELTASET_CLUSTER_KEY_FILE").value = "/etc/deltaset/key"));
  assertReports(secretFileProblems(wrong, example.metadata.name, keys, ["DELTASET_CLUSTER_KEY_FILE"]), /is not a key of Secret deltaset-cluster-key/);
});

test("no kustomization uses the deprecated commonLabels", () => {
  const files: string[] = [];
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir)) {
      const p = join(dir, e);
      if (statSync(p).isDirectory()) walk(p);
      else if (e === "kustomization.yaml") files.push(p);
    }
  };
  walk(K8S);
  assert.ok(files.length >= 5, `found ${files.length} kustomization files`);
  for (const f of files) {
    const doc = yaml.load(readFileSync(f, "utf8")) as Record<string, unknown>;
    assert.equal(doc.commonLabels, undefined, f);
  }
  const base = yaml.load(readFileSync(join(K8S, "base", "kustomization.yaml"), "utf8")) as Record<string, unknown>;
  assert.ok(Array.isArray(base.labels), "base uses labels:");
});

// --- The checkers fail on broken input ---------------------------------------------------

const BROKEN_PORTS = `
apiVersion: v1
kind: Service
metadata:
  name: broken
spec:
  selector:
    app: x
  ports:
    - name: grpc
      port: 70000
      targetPort: Bad_Name
    - name: zero
      port: 0
      targetPort: 7070.5
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: broken
spec:
  serviceName: broken
  selector:
    matchLabels:
      app: x
  template:
    metadata:
      labels:
        app: x
    spec:
      containers:
        - name: c
          image: x
          ports:
            - containerPort: 65536
          readinessProbe:
            grpc:
              port: grpc
`;

test("port checker: catches what kubernetes-models lets through", () => {
  const objs = parseManifests(BROKEN_PORTS);
  // The schema models check types but not ranges: 70000 and 65536 pass them.
  const schema = schemaProblems(objs).join("\n");
  assert.doesNotMatch(schema, /70000|65536/);
  const problems = portProblems(objs);
  assertReports(problems, /Service\/broken spec\.ports\[0\]\.port: 70000 is not a port number/);
  assertReports(problems, /Service\/broken spec\.ports\[0\]\.targetPort: "Bad_Name" is not a valid port name/);
  assertReports(problems, /Service\/broken spec\.ports\[1\]\.port: 0 is not a port number/);
  assertReports(problems, /Service\/broken spec\.ports\[1\]\.targetPort: 7070\.5 is not a port number/);
  assertReports(problems, /containerPort: 65536 is not a port number/);
  assertReports(problems, /readinessProbe\.grpc\.port: "grpc" is not a port number/);
  assert.equal(problems.length, 6, problems.join("\n"));
});

test("schema checker: wrong types, missing fields and unknown kinds", () => {
  const objs = parseManifests(`
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: broken
spec:
  replicas: three
  serviceName: x
  template:
    spec:
      containers:
        - image: x
---
apiVersion: v1
kind: Widget
metadata:
  name: w
`);
  const problems = schemaProblems(objs);
  assertReports(problems, /StatefulSet\/broken: .*spec must have required property selector/);
  assertReports(problems, /StatefulSet\/broken: .*replicas must be integer/);
  assertReports(problems, /StatefulSet\/broken: .*containers\/0 must have required property name/);
  assertReports(problems, /Widget\/w: no schema model/);
});

test("wiring checker: each broken link is reported", () => {
  const good = rendered("overlays/kind");
  const cm = (o: K8sObject[]) => findObject(o, "ConfigMap") as K8sObject;
  const svc = (o: K8sObject[], name: string) => findObject(o, "Service", name) as K8sObject;
  const cases: [string, (o: K8sObject[]) => void, RegExp][] = [
    ["listen port", (o) => (cm(o).data.DELTASET_LISTEN = "0.0.0.0:7071"), /DELTASET_LISTEN 0\.0\.0\.0:7071 does not use the grpc container port 7070/],
    ["loopback listen", (o) => (cm(o).data.DELTASET_LISTEN = "127.0.0.1:7070"), /is loopback/],
    ["metrics port", (o) => (cm(o).data.DELTASET_METRICS_LISTEN = "0.0.0.0:9000"), /DELTASET_METRICS_LISTEN/],
    ["serviceName", (o) => (sts(o).spec.serviceName = "deltaset-peer"), /serviceName deltaset-peer names no Service/],
    ["seeds service", (o) => (envEntry(o, "DELTASET_SEEDS_DNS").value = "deltaset.$(POD_NAMESPACE).svc.cluster.local:7070"), /DELTASET_SEEDS_DNS expands to deltaset\./],
    ["seeds namespace", (o) => (envEntry(o, "DELTASET_SEEDS_DNS").value = "deltaset-peers.default.svc.cluster.local:7070"), /DELTASET_SEEDS_DNS expands to deltaset-peers\.default/],
    ["seeds port", (o) => (envEntry(o, "DELTASET_SEEDS_DNS").value = "deltaset-peers.$(POD_NAMESPACE).svc.cluster.local:7000"), /DELTASET_SEEDS_DNS/],
    ["headless namespace", (o) => (svc(o, "deltaset-peers").metadata.namespace = "other"), /Service deltaset-peers is in namespace other/],
    ["not headless", (o) => delete svc(o, "deltaset-peers").spec.clusterIP, /is not headless/],
    ["not-ready addresses", (o) => (svc(o, "deltaset-peers").spec.publishNotReadyAddresses = false), /does not publish not-ready addresses/],
    [
      "env order",
      (o) => {
        const env = nodeContainer(o).env;
        const i = env.findIndex((e: { name: string }) => e.name === "DELTASET_ADVERTISE");
        env.unshift(...env.splice(i, 1));
      },
      /DELTASET_ADVERTISE refers to \$\(DELTASET_NODE_ID\), which is not defined before it/,
    ],
    ["node id", (o) => (envEntry(o, "DELTASET_NODE_ID").valueFrom.fieldRef.fieldPath = "metadata.uid"), /DELTASET_NODE_ID is not the pod name/],
    ["target port", (o) => (svc(o, "deltaset").spec.ports[0].targetPort = "grcp"), /Service deltaset port grpc targets grcp/],
    ["selector", (o) => (svc(o, "deltaset").spec.selector = { "app.kubernetes.io/name": "deltaset-x" }), /Service deltaset selects no deltaset pods/],
    ["probe port", (o) => (nodeContainer(o).readinessProbe.grpc.port = 7071), /readinessProbe checks port 7071/],
    ["no liveness", (o) => delete nodeContainer(o).livenessProbe, /no livenessProbe/],
    ["liveness on serving", (o) => delete nodeContainer(o).livenessProbe.grpc.service, /livenessProbe asks health service "", expected "liveness"/],
    ["readiness on liveness", (o) => (nodeContainer(o).readinessProbe.grpc.service = "liveness"), /readinessProbe asks health service "liveness", expected ""/],
    ["data dir", (o) => (cm(o).data.DELTASET_DATA_DIR = "/data"), /DELTASET_DATA_DIR \/data is not on a writable mount/],
    ["root fs", (o) => (nodeContainer(o).securityContext.readOnlyRootFilesystem = false), /root filesystem is not read-only/],
    ["tmp", (o) => (nodeContainer(o).volumeMounts = nodeContainer(o).volumeMounts.filter((m: { name: string }) => m.name !== "tmp")), /no writable \/tmp/],
    ["uid", (o) => (sts(o).spec.template.spec.securityContext.runAsUser = 1000), /runAsUser 1000 is not the image's uid 10001/],
    ["grace", (o) => (sts(o).spec.template.spec.terminationGracePeriodSeconds = 35), /terminationGracePeriodSeconds 35 leaves no margin/],
    ["service links", (o) => delete sts(o).spec.template.spec.enableServiceLinks, /enableServiceLinks/],
    ["pod management", (o) => (sts(o).spec.podManagementPolicy = "OrderedReady"), /podManagementPolicy is not Parallel/],
    ["pdb", (o) => ((findObject(o, "PodDisruptionBudget") as K8sObject).spec.maxUnavailable = 2), /maxUnavailable is 2/],
    ["netpol peers", (o) => ((findObject(o, "NetworkPolicy") as K8sObject).spec.ingress[0].ports[0].port = 7000), /does not let deltaset pods reach each other on 7070/],
    ["netpol metrics", (o) => ((findObject(o, "NetworkPolicy") as K8sObject).spec.ingress.pop()), /does not admit scrapes on 9464/],
    ["scrape annotation", (o) => (sts(o).spec.template.metadata.annotations["prometheus.io/port"] = "9465"), /prometheus\.io\/port 9465/],
  ];
  assert.deepEqual(wiringProblems(good), [], "the unmodified render passes");
  for (const [name, change, pattern] of cases) {
    const problems = wiringProblems(mutated(good, change));
    assert.ok(problems.some((p) => pattern.test(p)), `${name}: expected ${pattern}, got ${JSON.stringify(problems)}`);
  }
});

test("kustomize render fails loudly on a broken kustomization", () => {
  assert.throws(() => renderKustomize(join(K8S, "does-not-exist")), /kubectl kustomize .* exited/);
  assert.ok(existsSync(join(K8S, "base", "kustomization.yaml")));
});
