"""The official E2B Python SDK (`pip install e2b`) against `stampede serve`.

Environment: E2B_API_URL (the service), E2B_API_KEY (its key), MOCK_ADMIN (the mock-node
fleet's admin URL, whose /nodes is the ground truth). Exits non-zero on the first
failed expectation; prints one line per step.
"""

import json
import os
import sys
import urllib.request
import uuid

from datetime import datetime, timezone

from e2b import Sandbox, SandboxQuery, SandboxState
from e2b.api.client.api.sandboxes import (
    post_sandboxes_sandbox_id_refreshes,
    post_sandboxes_sandbox_id_resume,
)
from e2b.api.client.models import ResumedSandbox, SandboxRefreshRequest
from e2b.api.client_sync import get_api_client
from e2b.connection_config import ConnectionConfig
from e2b.exceptions import (
    AuthenticationException,
    NotFoundException,
    SandboxException,
    SandboxNotFoundException,
)

API_URL = os.environ["E2B_API_URL"]
MOCK_ADMIN = os.environ["MOCK_ADMIN"]
RUN = uuid.uuid4().hex[:8]


def on_nodes():
    """Every sandbox id the mock nodes run now."""
    with urllib.request.urlopen(MOCK_ADMIN + "/nodes", timeout=10) as r:
        body = json.load(r)
    return {i for n in body["nodes"] for i in n["sandbox_ids"]}


def node_of(sandbox_id):
    """The mock node running `sandbox_id`, or None."""
    with urllib.request.urlopen(MOCK_ADMIN + "/nodes", timeout=10) as r:
        body = json.load(r)
    hits = [n["id"] for n in body["nodes"] if sandbox_id in n["sandbox_ids"]]
    return hits[0] if hits else None


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        sys.exit(1)


created = []
for k in range(3):
    sbx = Sandbox.create(
        "base", timeout=120, metadata={"suite": "python", "run": RUN, "k": str(k)}
    )
    created.append(sbx.sandbox_id)
check(len(created) == 3, f"created 3 sandboxes with metadata and timeout: {created}")
check(
    all(len(i) == 21 and i.startswith("i") for i in created),
    "ids are i + 20 characters",
)

nodes_now = on_nodes()
check(set(created) <= nodes_now, "all 3 run on the mock nodes")

paginator = Sandbox.list(query=SandboxQuery(metadata={"run": RUN, "k": "1"}))
page = paginator.next_items()
check(
    [s.sandbox_id for s in page] == [created[1]],
    f"list with metadata filter finds exactly the k=1 sandbox ({len(page)} found)",
)
listed_all = Sandbox.list(query=SandboxQuery(metadata={"run": RUN})).next_items()
check(len(listed_all) == 3, "list with the run filter finds all 3")

info = Sandbox.get_info(created[0])
check(info.sandbox_id == created[0], "get_info returns the sandbox")
check(info.metadata.get("suite") == "python", f"get_info carries the metadata {info.metadata}")
check(info.template_id == "base", "get_info carries the template")
span = (info.end_at - info.started_at).total_seconds()
check(abs(span - 120) < 2, f"end_at - started_at is the 120 s timeout ({span:.1f} s)")

for i in created:
    check(Sandbox.kill(i) is True, f"kill {i} -> True")
check(Sandbox.kill("i" + "0" * 20) is False, "kill of an unknown id -> False")
check(not (set(created) & on_nodes()), "the killed sandboxes are gone from the mock nodes")

try:
    Sandbox.create("base", api_key="e2b_" + "0" * 40)
    check(False, "a wrong API key is refused")
except AuthenticationException as e:
    check(True, f"a wrong API key is refused: AuthenticationException: {e}")

# ---- the lifecycle beyond create -------------------------------------------------
life = Sandbox.create("base", timeout=120, metadata={"suite": "python", "run": RUN, "life": "1"})
sid = life.sandbox_id
life.set_timeout(60)
left = (Sandbox.get_info(sid).end_at - datetime.now(timezone.utc)).total_seconds()
check(55 < left <= 61, f"set_timeout(60) shortens the end time ({left:.1f} s left)")
try:
    Sandbox.set_timeout("i" + "0" * 20, 30)
    check(False, "set_timeout of an unknown id is refused")
except NotFoundException:
    check(True, "set_timeout of an unknown id -> not found")

api = get_api_client(ConnectionConfig(api_key=os.environ["E2B_API_KEY"]))
res = post_sandboxes_sandbox_id_refreshes.sync_detailed(
    sid, client=api, body=SandboxRefreshRequest(duration=600)
)
check(res.status_code == 204, f"refresh -> 204 ({res.status_code})")
left = (Sandbox.get_info(sid).end_at - datetime.now(timezone.utc)).total_seconds()
check(595 < left <= 601, f"a refresh of 600 s extends the end time ({left:.1f} s left)")

metrics = Sandbox.get_metrics(sid)
check(len(metrics) >= 1, f"get_metrics answers samples ({len(metrics)})")
check(all(m.cpu_count == 1 and m.mem_total > 0 for m in metrics), "each sample has the sandbox's vCPU and memory")

origin = node_of(sid)
check(origin is not None, f"the sandbox runs on {origin}")
check(life.pause() is True, "pause -> True")
check(node_of(sid) is None, "a paused sandbox is gone from the mock nodes")
check(Sandbox.pause(sid) is False, "pause of a paused sandbox -> False (409)")
check(Sandbox.get_info(sid).state == SandboxState.PAUSED, "get_info says paused")
paused = Sandbox.list(query=SandboxQuery(state=[SandboxState.PAUSED], metadata={"run": RUN})).next_items()
check([s.sandbox_id for s in paused] == [sid], f"list(state=paused) finds it ({len(paused)})")
running = Sandbox.list(query=SandboxQuery(state=[SandboxState.RUNNING], metadata={"run": RUN, "life": "1"})).next_items()
check(running == [], "list(state=running) does not")
try:
    Sandbox.set_timeout(sid, 30)
    check(False, "set_timeout of a paused sandbox is refused")
except NotFoundException:
    check(True, "set_timeout of a paused sandbox -> not found (not in the running store)")

back = Sandbox.connect(sid, timeout=120)
check(back.sandbox_id == sid, "connect resumes the paused sandbox")
check(node_of(sid) == origin, f"it resumed on its origin node {origin}")
check(Sandbox.get_info(sid).state == SandboxState.RUNNING, "get_info says running")
again = Sandbox.connect(sid, timeout=60)
check(again.sandbox_id == sid, "connect to a running sandbox answers it")

check(Sandbox.pause(sid) is True, "pause again -> True")
res = post_sandboxes_sandbox_id_resume.sync_detailed(sid, client=api, body=ResumedSandbox(timeout=120))
check(res.status_code == 201, f"resume (deprecated route) -> 201 ({res.status_code})")
check(node_of(sid) == origin, "resumed on its origin node again")
res = post_sandboxes_sandbox_id_resume.sync_detailed(sid, client=api, body=ResumedSandbox(timeout=120))
check(res.status_code == 409, f"resume of a running sandbox -> 409 ({res.status_code})")

name = f"sdk-py-{RUN}"
snap = back.create_snapshot(name=name)
check(
    snap.snapshot_id == f"stampede/{name}:default" and snap.names == [f"stampede/{name}"],
    f"create_snapshot(name) -> {snap}",
)
check(node_of(sid) == origin, "the snapshotted sandbox keeps running where it was")
bare = Sandbox.create_snapshot(sid)
check(bare.snapshot_id.endswith(":default") and bare.names == [], f"create_snapshot(id) -> {bare}")
listed = [i.snapshot_id for i in back.list_snapshots().next_items()]
check(listed == [bare.snapshot_id, snap.snapshot_id], f"list_snapshots of the sandbox, newest first: {listed}")
by_name = [i.snapshot_id for i in Sandbox.list_snapshots(name=name).next_items()]
check(by_name == [snap.snapshot_id], f"list_snapshots(name) -> {by_name}")
pages = Sandbox.list_snapshots(sandbox_id=sid, limit=1)
paged = []
for _ in range(10):
    if not pages.has_next:
        break
    paged += [i.snapshot_id for i in pages.next_items()]
check(paged == listed, f"list_snapshots(limit=1) pages through both: {paged}")
from_snap = Sandbox.create(snap.snapshot_id, timeout=60)
check(from_snap.sandbox_id in on_nodes(), f"a sandbox created from {snap.snapshot_id} runs")
check(Sandbox.kill(from_snap.sandbox_id) is True, "kill the sandbox made from the snapshot")

forks = back.fork(count=2, timeout=60)
check(len(forks) == 2 and all(isinstance(f, Sandbox) for f in forks), f"fork(count=2) -> 2 sandboxes {forks}")
on_nodes = on_nodes()
check(all(f.sandbox_id in on_nodes for f in forks), "the forks run on the mock nodes")
check(node_of(sid) == origin, "the forked sandbox keeps running where it was")

for f in forks:
    check(Sandbox.kill(f.sandbox_id) is True, f"kill fork {f.sandbox_id} -> True")
check(Sandbox.kill(sid) is True, f"kill {sid} -> True")
try:
    Sandbox.connect(sid, timeout=60)
    check(False, "connect to a killed sandbox is refused")
except NotFoundException:
    check(True, "connect to a killed sandbox -> not found")

# ---- what serve does not have ----------------------------------------------------
# A 404 on create is no "sandbox not found": the SDK raises its base SandboxException
# carrying the status and E2B's message (as it does for E2B's own unknown template).
try:
    Sandbox.create("nosuchtemplate", timeout=60)
    check(False, "a create of an unknown template is refused")
except SandboxException as e:
    check(
        type(e) is SandboxException
        and e.status_code == 404
        and "template 'nosuchtemplate' not found" in str(e),
        f"unknown template -> {type(e).__name__} ({e.status_code}): {e}",
    )
# An E2B route serve lacks, on a live sandbox: 501 naming the route, which the SDK
# raises as its base SandboxException, not SandboxNotFoundException (as a 404 would be).
live = Sandbox.create("base", timeout=60, metadata={"suite": "python", "run": RUN})
try:
    live.update_network({"allow_out": ["1.1.1.1"]})
    check(False, "update_network (a route serve lacks) is refused")
except SandboxNotFoundException as e:
    check(False, f"update_network of a live sandbox must not read as not found: {e}")
except SandboxException as e:
    check(
        e.status_code == 501
        and "PUT /sandboxes/{sandboxID}/network is not supported by stampede serve" in str(e),
        f"update_network -> {type(e).__name__} ({e.status_code}): {e}",
    )
check(Sandbox.kill(live.sandbox_id) is True, "kill the sandbox of the unsupported call")

print("python SDK suite: all passed")
