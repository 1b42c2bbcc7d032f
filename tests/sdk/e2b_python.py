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

from e2b import Sandbox, SandboxQuery
from e2b.exceptions import AuthenticationException

API_URL = os.environ["E2B_API_URL"]
MOCK_ADMIN = os.environ["MOCK_ADMIN"]
RUN = uuid.uuid4().hex[:8]


def on_nodes():
    """Every sandbox id the mock nodes run now."""
    with urllib.request.urlopen(MOCK_ADMIN + "/nodes", timeout=10) as r:
        body = json.load(r)
    return {i for n in body["nodes"] for i in n["sandbox_ids"]}


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

print("python SDK suite: all passed")
