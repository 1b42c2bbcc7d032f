#!/usr/bin/env python3
"""Checks deploy/ beyond schema validation: that a staging E2B API can reach the mocks,
and that a production one cannot.

Kubernetes: a host-network DaemonSet (E2B dials each pod's status.hostIP on 5008) whose
pods carry stampede's own label, never E2B's production selector; the RBAC a staging API
needs to list them; the admin Secret it references shipped as an example; an HTTP
/health probe on the gRPC port. Nomad (parsed as HCL2 with python-hcl2): a system job on
a dedicated node pool registering stampede's own service name on port 5008 with E2B's
HTTP /health check. Both run the same pinned image, built by mock-node.Dockerfile (a
static musl binary on scratch).

Usage: check.py [DEPLOY_DIR] (default: this file's directory). Exit 0 when every check
holds; otherwise each failure is printed and the exit is 1. Kubernetes schema validation
itself is done by `kubernetes-validate` (see .ci/run).
"""

import pathlib
import re
import sys

import hcl2
import yaml

DEPLOY = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else __file__).resolve()
if DEPLOY.is_file():
    DEPLOY = DEPLOY.parent
REPO = pathlib.Path(__file__).resolve().parent.parent

# What E2B's production API discovers by default (packages/api/internal/cfg/model.go).
E2B_SERVICE_NAME = "orchestrator"
E2B_POD_SELECTOR = ("app.kubernetes.io/name", "orchestrator")
LABEL = ("app.kubernetes.io/name", "stampede-mock-orchestrator")
SERVICE_NAME = "stampede-orchestrator"
GRPC_PORT = 5008

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def unquote(v):
    """python-hcl2 keeps the quotes of string literals."""
    if isinstance(v, str) and len(v) >= 2 and v[0] == v[-1] == '"':
        return v[1:-1]
    return v


def only(blocks, name):
    """The body of the labelled block `name` in a python-hcl2 block list ({} if absent,
    recorded as a failure)."""
    for b in blocks or []:
        for k, body in b.items():
            if unquote(k) == name:
                return body
    failures.append(f"nomad: no block named {name!r}")
    return {}


def pinned(image):
    """An explicit tag that is not `latest` (or a digest)."""
    if "@sha256:" in image:
        return True
    tag = image.rsplit("/", 1)[-1].partition(":")[2]
    return bool(tag) and tag != "latest"


cargo_version = re.search(
    r'^version = "([^"]+)"', (REPO / "Cargo.toml").read_text(), re.M
).group(1)

# ---- Kubernetes ----------------------------------------------------------------------
docs = []
for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
    with open(path) as f:
        docs += [d for d in yaml.safe_load_all(f) if d]
kinds = {}
for d in docs:
    kinds.setdefault(d.get("kind"), []).append(d)
check(not kinds.get("Deployment"), "kubernetes: no Deployment (E2B dials host IPs: a DaemonSet)")
daemonsets = kinds.get("DaemonSet", [])
check(len(daemonsets) == 1, "kubernetes: exactly one DaemonSet")
ds = daemonsets[0] if daemonsets else {"metadata": {}, "spec": {"template": {"metadata": {}, "spec": {"containers": [{}]}}}}
namespace = ds["metadata"].get("namespace")
pod = ds["spec"]["template"]
labels = pod["metadata"].get("labels", {})
spec = pod["spec"]
container = spec["containers"][0]
image = container.get("image", "")
check(spec.get("hostNetwork") is True, "kubernetes: the pods use host networking")
check(
    spec.get("dnsPolicy") == "ClusterFirstWithHostNet",
    "kubernetes: dnsPolicy ClusterFirstWithHostNet (host network keeps cluster DNS)",
)
check(labels.get(LABEL[0]) == LABEL[1], f"kubernetes: pods labelled {LABEL[0]}={LABEL[1]}")
all_labels = [ds["metadata"].get("labels", {}), labels, ds["spec"].get("selector", {}).get("matchLabels", {})]
check(
    all(l.get(E2B_POD_SELECTOR[0]) != E2B_POD_SELECTOR[1] for l in all_labels),
    "kubernetes: nothing carries E2B's production label app.kubernetes.io/name=orchestrator",
)
check(bool(spec.get("nodeSelector")), "kubernetes: the DaemonSet runs on dedicated (selected) nodes")
ports = {p.get("name"): p for p in container.get("ports", [])}
check(
    ports.get("grpc", {}).get("containerPort") == GRPC_PORT
    and ports.get("grpc", {}).get("hostPort") == GRPC_PORT,
    "kubernetes: gRPC on the host's port 5008",
)
probe = container.get("readinessProbe", {}).get("httpGet", {})
check(
    probe.get("path") == "/health" and probe.get("port") == GRPC_PORT,
    "kubernetes: readiness is HTTP GET /health on the gRPC port",
)
env = {e["name"]: e for e in container.get("env", [])}
check(
    env.get("HOST_IP", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "status.hostIP"
    and "--advertise-ip=$(HOST_IP)" in container.get("args", []),
    "kubernetes: advertises the host IP (status.hostIP), not 0.0.0.0",
)
secret_ref = env.get("MOCK_NODE_ADMIN_TOKEN", {}).get("valueFrom", {}).get("secretKeyRef", {})
secrets = {s["metadata"]["name"]: s for s in kinds.get("Secret", [])}
check(
    secret_ref.get("name") in secrets
    and secret_ref.get("key") in secrets[secret_ref.get("name")].get("stringData", {}),
    "kubernetes: the admin Secret the DaemonSet references is shipped as an example",
)
roles = [
    r
    for r in kinds.get("Role", [])
    if any("pods" in rule.get("resources", []) and "list" in rule.get("verbs", []) for rule in r.get("rules", []))
]
check(len(roles) == 1, "kubernetes: a Role lets the staging API list pods")
bindings = [b for b in kinds.get("RoleBinding", []) if roles and b["roleRef"]["name"] == roles[0]["metadata"]["name"]]
check(len(bindings) == 1, "kubernetes: a RoleBinding grants that Role")
for d in docs:
    if d.get("kind") != "Namespace":
        check(
            d["metadata"].get("namespace") == namespace,
            f"kubernetes: {d.get('kind')} {d['metadata'].get('name')} is in the DaemonSet's namespace {namespace}",
        )
check(pinned(image), f"kubernetes: image {image!r} has a pinned tag")
check(
    image.endswith(":" + cargo_version),
    f"kubernetes: image tag is the release version {cargo_version}",
)
check(container.get("command") == ["/usr/local/bin/mock-node"], "kubernetes: runs /usr/local/bin/mock-node")

# ---- Nomad ---------------------------------------------------------------------------
with open(DEPLOY / "nomad" / "mock-orchestrator.nomad.hcl") as f:
    job_file = hcl2.load(f)
job = only(job_file.get("job"), "stampede-mock-orchestrator")
check(unquote(job.get("type")) == "system", "nomad: a system job (one mock per client)")
pool = unquote(job.get("node_pool"))
check(pool not in (None, "default", "all"), f"nomad: a dedicated node pool (got {pool!r})")
group = only(job.get("group"), "mock-orchestrator")
task = only(group.get("task"), "mock-node")
config = (task.get("config") or [{}])[0]
check(unquote(task.get("driver")) == "docker", "nomad: the task uses the docker driver")
check(
    unquote(config.get("image")) == image,
    f"nomad: image {unquote(config.get('image'))!r} is the DaemonSet's {image!r}",
)
service = (group.get("service") or [{}])[0]
name = unquote(service.get("name"))
check(name == SERVICE_NAME, f"nomad: service named {SERVICE_NAME} (got {name!r})")
check(name != E2B_SERVICE_NAME, "nomad: never E2B's production service name")
check(unquote(service.get("port")) == "grpc", "nomad: the service registers the gRPC port")
checks = service.get("check", [])
check(
    any(unquote(c.get("type")) == "http" and unquote(c.get("path")) == "/health" for c in checks),
    "nomad: an HTTP /health check (on the service's gRPC port)",
)
network = (group.get("network") or [{}])[0]
ports = {unquote(k): v.get("static") for p in network.get("port", []) for k, v in p.items()}
check(ports.get("grpc") == GRPC_PORT, f"nomad: grpc on 5008 (got {ports.get('grpc')})")
check(
    [unquote(p) for p in config.get("ports", [])] == ["grpc", "admin"],
    "nomad: the docker task maps the grpc and admin ports",
)
args = [unquote(a) for a in config.get("args", [])]
check("--advertise-ip" in args, "nomad: advertises the client's IP, not 0.0.0.0")

# ---- Dockerfile ----------------------------------------------------------------------
dockerfile = (DEPLOY / "mock-node.Dockerfile").read_text()
lines = [l.strip() for l in dockerfile.splitlines() if l.strip() and not l.startswith("#")]
froms = [l.split()[1] for l in lines if l.upper().startswith("FROM ")]
check(froms[:1] and "alpine" in froms[0], "Dockerfile: builds on Alpine (musl)")
check(froms[-1:] == ["scratch"], "Dockerfile: the final image is scratch")
check("+crt-static" in dockerfile, "Dockerfile: links statically (+crt-static)")
check("-p mock-node" in dockerfile, "Dockerfile: builds the mock-node package")
check(
    'ENTRYPOINT ["/usr/local/bin/mock-node"]' in dockerfile,
    "Dockerfile: the entrypoint is the path both manifests run",
)

for f in failures:
    print(f"deploy check failed: {f}", file=sys.stderr)
if failures:
    sys.exit(1)
print(
    f"deploy: DaemonSet (host network, {LABEL[0]}={LABEL[1]}, RBAC, example Secret) and "
    f"Nomad system job (pool {pool}, service {name}, /health) run {image}"
)
