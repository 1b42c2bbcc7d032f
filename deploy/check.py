#!/usr/bin/env python3
"""Checks deploy/ beyond schema validation: the Nomad job parses as HCL2 (python-hcl2)
and runs the image deploy/mock-node.Dockerfile builds, as the Kubernetes Deployment
does; the Dockerfile builds a static musl binary into an empty image.

Exit 0 when every check holds; otherwise each failure is printed and the exit is 1.
Kubernetes schema validation itself is done by `kubernetes-validate` (see .ci/run).
"""

import pathlib
import sys

import hcl2
import yaml

DEPLOY = pathlib.Path(__file__).resolve().parent
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
    """The body of the single labelled block `name` in a python-hcl2 block list."""
    for b in blocks:
        for k, body in b.items():
            if unquote(k) == name:
                return body
    raise KeyError(name)


with open(DEPLOY / "kubernetes" / "mock-orchestrator.yaml") as f:
    docs = [d for d in yaml.safe_load_all(f) if d]
deployments = [d for d in docs if d.get("kind") == "Deployment"]
check(len(deployments) == 1, "kubernetes: exactly one Deployment")
pod = deployments[0]["spec"]["template"]
containers = pod["spec"]["containers"]
image = containers[0]["image"]
check(
    pod["metadata"]["labels"].get("app.kubernetes.io/name") == "orchestrator",
    "kubernetes: pods carry app.kubernetes.io/name=orchestrator (E2B's selector)",
)

with open(DEPLOY / "nomad" / "mock-orchestrator.nomad.hcl") as f:
    job = hcl2.load(f)
group = only(only(job["job"], "mock-orchestrator")["group"], "orchestrator")
task = only(group["task"], "mock-node")
config = task["config"][0]
check(unquote(task["driver"]) == "docker", "nomad: the task uses the docker driver")
check(
    unquote(config.get("image")) == image,
    f"nomad: image {unquote(config.get('image'))!r} is the Deployment's {image!r}",
)
check(
    unquote(group["service"][0]["name"]) == "orchestrator",
    "nomad: service named orchestrator (what E2B's API looks up)",
)
ports = {unquote(k): v["static"] for p in group["network"][0]["port"] for k, v in p.items()}
check(ports.get("grpc") == 5008, f"nomad: grpc on 5008 (got {ports.get('grpc')})")
check(
    [unquote(p) for p in config.get("ports", [])] == ["grpc", "admin"],
    "nomad: the docker task maps the grpc and admin ports",
)

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
check(
    containers[0].get("command") == ["/usr/local/bin/mock-node"],
    "kubernetes: runs /usr/local/bin/mock-node",
)

for f in failures:
    print(f"deploy check failed: {f}", file=sys.stderr)
if failures:
    sys.exit(1)
print(f"deploy: nomad job parsed; both manifests run {image}; Dockerfile builds a static musl binary")
