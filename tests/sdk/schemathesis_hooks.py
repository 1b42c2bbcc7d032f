"""schemathesis hooks for the E2B-compatible document.

schemathesis's `ensure_resource_availability` fails a 404 on a resource that a successful
POST created earlier in the same stateful scenario, unless a DELETE on a prefix of the
path (or an unsafe request to the very same path) removed it in between. E2B's API has
other ways for a sandbox to leave, after which it answers 404 as E2B does:

- A timeout of a few seconds, at create (`POST /sandboxes`, `POST /v2/sandboxes`), by
  `POST /sandboxes/{sandboxID}/timeout` or at a resume: the sandbox ends within the
  scenario and the evictor deletes it; every route then answers 404. (A scenario lasts
  well under a second on an idle machine: a longer timeout, the create's default of 15 s
  included, cannot end it, and a 404 after one still fails.)
- `POST /sandboxes/{sandboxID}/pause`: a paused sandbox leaves the API's store of running
  sandboxes, so the routes that act on a running one (`timeout`, `refreshes`) answer 404
  until a resume or a connect brings it back (`GET /sandboxes/{sandboxID}` still shows
  it as paused).
- `DELETE /sandboxes/{sandboxID}` ends it for the `/v2/...` routes too, which the
  built-in check does not see as below the deleted path.

`sandbox_availability` is that check with those removals taught, following the
scenario's calls on the sandbox in the order they ran; in every other case it defers to
the built-in check, so a created sandbox that vanishes without one of them still fails.
The CI runs it with the built-in check excluded.

`GET /snapshots?nextToken=` takes only a cursor the server gave (E2B's: base64url of
`{time}__{id}`), and answers 400 for another string as E2B's handler does; a generated
string is no cursor, so `before_call` drops one that does not read as a cursor (the
Rust tests send a bad token and expect the 400).
"""

import base64
import binascii

import schemathesis
from schemathesis.specs.openapi.checks import ensure_resource_availability

KILLS = {("DELETE", "/sandboxes/{sandboxID}")}
CREATES = {("POST", "/sandboxes"), ("POST", "/v2/sandboxes")}
SETS_TIMEOUT = {("POST", "/sandboxes/{sandboxID}/timeout")}
# A timeout (seconds) this short can run out within a scenario on a loaded runner.
SHORT_TIMEOUT = 5
PAUSES = {("POST", "/sandboxes/{sandboxID}/pause")}
RESUMES = {
    ("POST", "/sandboxes/{sandboxID}/resume"),
    ("POST", "/sandboxes/{sandboxID}/connect"),
    ("POST", "/v2/sandboxes/{sandboxID}/connect"),
}
# Routes that act on a running sandbox only: E2B answers 404 for a paused one.
RUNNING_ONLY = {
    ("POST", "/sandboxes/{sandboxID}/timeout"),
    ("POST", "/sandboxes/{sandboxID}/refreshes"),
}


def _call(case):
    return (case.operation.method.upper(), case.path)


def _sandbox_id(case):
    return (case.path_parameters or {}).get("sandboxID")


def _created_id(answer):
    try:
        body = answer.json()
    except ValueError:
        return None
    return body.get("sandboxID") if isinstance(body, dict) else None


def _short_timeout(case):
    """Whether the call's body sets a timeout that can run out within a scenario (a
    missing one is the route's default: 15 s at create and resume, 300 s at connect)."""
    body = case.body if isinstance(case.body, dict) else {}
    timeout = body.get("timeout", 15)
    return isinstance(timeout, int) and timeout < SHORT_TIMEOUT


def _gone_for(ctx, case):
    """Whether the scenario's earlier successful calls on the case's sandbox explain a 404
    on the case's route."""
    recorder = ctx.internals.recorder
    sandbox = _sandbox_id(case)
    if recorder is None or sandbox is None:
        return False
    ended = paused = False
    for prior in recorder.find_all_cases():
        if prior.id == case.id:
            break
        answer = recorder.find_response(case_id=prior.id)
        if answer is None or not 200 <= answer.status_code < 300:
            continue
        call = _call(prior)
        if call in CREATES:
            ended = ended or (_created_id(answer) == sandbox and _short_timeout(prior))
            continue
        if _sandbox_id(prior) != sandbox:
            continue
        if call in KILLS or (call in SETS_TIMEOUT and _short_timeout(prior)):
            ended = True
        elif call in PAUSES:
            paused = True
        elif call in RESUMES:
            paused = False
            ended = ended or _short_timeout(prior)
    return ended or (paused and _call(case) in RUNNING_ONLY)


@schemathesis.check
def sandbox_availability(ctx, response, case):
    """`ensure_resource_availability`, knowing E2B's timeouts, pauses and kills."""
    if response.status_code == 404 and _gone_for(ctx, case):
        return None
    return ensure_resource_availability(ctx, response, case)


def _is_cursor(token):
    """Whether `token` reads as a snapshot list cursor (an empty one is the first page)."""
    if token == "":
        return True
    try:
        text = base64.urlsafe_b64decode(token.encode()).decode()
    except (binascii.Error, UnicodeError, ValueError):
        return False
    return "__" in text


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    """Drop a generated `nextToken` of `GET /snapshots` that is no cursor."""
    query = case.query
    if _call(case) != ("GET", "/snapshots") or not isinstance(query, dict):
        return None
    token = query.get("nextToken")
    if isinstance(token, str) and not _is_cursor(token):
        del query["nextToken"]
    return None
