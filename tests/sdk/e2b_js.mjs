// The official E2B JS SDK (`npm install e2b`) against `stampede serve`.
// Environment: E2B_API_URL, E2B_API_KEY, MOCK_ADMIN (mock-node fleet admin URL).
import {
  Sandbox,
  AuthenticationError,
  NotFoundError,
  SandboxError,
  SandboxNotFoundError,
  ApiClient,
  ConnectionConfig,
} from 'e2b'
import { randomUUID } from 'node:crypto'

const apiUrl = process.env.E2B_API_URL
const mockAdmin = process.env.MOCK_ADMIN
const run = randomUUID().slice(0, 8)
const opts = { apiUrl }

function check(cond, what) {
  console.log((cond ? 'ok   ' : 'FAIL ') + what)
  if (!cond) process.exit(1)
}

async function nodeOf(id) {
  const r = await fetch(`${mockAdmin}/nodes`)
  const body = await r.json()
  const hit = body.nodes.find((n) => n.sandbox_ids.includes(id))
  return hit ? hit.id : null
}

async function refused(call, what) {
  try {
    await call()
    check(false, what)
  } catch (e) {
    check(e instanceof NotFoundError, `${what}: ${e.name}`)
  }
}

async function onNodes() {
  const r = await fetch(`${mockAdmin}/nodes`)
  const body = await r.json()
  return new Set(body.nodes.flatMap((n) => n.sandbox_ids))
}

const created = []
for (let k = 0; k < 3; k++) {
  const sbx = await Sandbox.create('base', {
    ...opts,
    timeoutMs: 120_000,
    metadata: { suite: 'js', run, k: String(k) },
  })
  created.push(sbx.sandboxId)
}
check(created.length === 3, `created 3 sandboxes with metadata and timeout: ${created}`)
check(created.every((i) => i.length === 21 && i.startsWith('i')), 'ids are i + 20 characters')

let nodes = await onNodes()
check(created.every((i) => nodes.has(i)), 'all 3 run on the mock nodes')

const page = await Sandbox.list({ ...opts, query: { metadata: { run, k: '1' } } }).nextItems()
check(
  page.length === 1 && page[0].sandboxId === created[1],
  `list with metadata filter finds exactly the k=1 sandbox (${page.length} found)`
)
const all = await Sandbox.list({ ...opts, query: { metadata: { run } } }).nextItems()
check(all.length === 3, 'list with the run filter finds all 3')

const info = await Sandbox.getInfo(created[0], opts)
check(info.sandboxId === created[0], 'getInfo returns the sandbox')
check(info.metadata.suite === 'js', `getInfo carries the metadata ${JSON.stringify(info.metadata)}`)
check(info.templateId === 'base', 'getInfo carries the template')
const span = (info.endAt - info.startedAt) / 1000
check(Math.abs(span - 120) < 2, `endAt - startedAt is the 120 s timeout (${span.toFixed(1)} s)`)

for (const i of created) {
  check((await Sandbox.kill(i, opts)) === true, `kill ${i} -> true`)
}
check((await Sandbox.kill('i' + '0'.repeat(20), opts)) === false, 'kill of an unknown id -> false')
nodes = await onNodes()
check(created.every((i) => !nodes.has(i)), 'the killed sandboxes are gone from the mock nodes')

try {
  await Sandbox.create('base', { ...opts, apiKey: 'e2b_' + '0'.repeat(40) })
  check(false, 'a wrong API key is refused')
} catch (e) {
  check(e instanceof AuthenticationError, `a wrong API key is refused: ${e.name}: ${e.message}`)
}
// ---- the lifecycle beyond create -------------------------------------------------
const life = await Sandbox.create('base', {
  ...opts,
  timeoutMs: 120_000,
  metadata: { suite: 'js', run, life: '1' },
})
const sid = life.sandboxId
await life.setTimeout(60_000)
let left = ((await Sandbox.getInfo(sid, opts)).endAt - Date.now()) / 1000
check(left > 55 && left <= 61, `setTimeout(60 s) shortens the end time (${left.toFixed(1)} s left)`)
await refused(() => Sandbox.setTimeout('i' + '0'.repeat(20), 30_000, opts), 'setTimeout of an unknown id -> not found')

const api = new ApiClient(new ConnectionConfig({ ...opts, apiKey: process.env.E2B_API_KEY }))
let res = await api.api.POST('/sandboxes/{sandboxID}/refreshes', {
  params: { path: { sandboxID: sid } },
  body: { duration: 600 },
})
check(res.response.status === 204, `refresh -> 204 (${res.response.status})`)
left = ((await Sandbox.getInfo(sid, opts)).endAt - Date.now()) / 1000
check(left > 595 && left <= 601, `a refresh of 600 s extends the end time (${left.toFixed(1)} s left)`)

const metrics = await Sandbox.getMetrics(sid, opts)
check(metrics.length >= 1, `getMetrics answers samples (${metrics.length})`)
check(metrics.every((m) => m.cpuCount === 1 && m.memTotal > 0), "each sample has the sandbox's vCPU and memory")

const origin = await nodeOf(sid)
check(origin !== null, `the sandbox runs on ${origin}`)
check((await life.pause()) === true, 'pause -> true')
check((await nodeOf(sid)) === null, 'a paused sandbox is gone from the mock nodes')
check((await Sandbox.pause(sid, opts)) === false, 'pause of a paused sandbox -> false (409)')
check((await Sandbox.getInfo(sid, opts)).state === 'paused', 'getInfo says paused')
const paused = await Sandbox.list({ ...opts, query: { state: ['paused'], metadata: { run } } }).nextItems()
check(paused.length === 1 && paused[0].sandboxId === sid, `list(state=paused) finds it (${paused.length})`)
await refused(() => Sandbox.setTimeout(sid, 30_000, opts), 'setTimeout of a paused sandbox -> not found')

const back = await Sandbox.connect(sid, { ...opts, timeoutMs: 120_000 })
check(back.sandboxId === sid, 'connect resumes the paused sandbox')
check((await nodeOf(sid)) === origin, `it resumed on its origin node ${origin}`)
check((await Sandbox.getInfo(sid, opts)).state === 'running', 'getInfo says running')
await back.connect({ timeoutMs: 60_000 })
check(true, 'connect to a running sandbox answers it')

check((await Sandbox.pause(sid, opts)) === true, 'pause again -> true')
res = await api.api.POST('/sandboxes/{sandboxID}/resume', {
  params: { path: { sandboxID: sid } },
  body: { timeout: 120 },
})
check(res.response.status === 201, `resume (deprecated route) -> 201 (${res.response.status})`)
check((await nodeOf(sid)) === origin, 'resumed on its origin node again')
res = await api.api.POST('/sandboxes/{sandboxID}/resume', {
  params: { path: { sandboxID: sid } },
  body: { timeout: 120 },
})
check(res.response.status === 409, `resume of a running sandbox -> 409 (${res.response.status})`)

const snapName = `sdk-js-${run}`
const snap = await back.createSnapshot({ name: snapName })
check(
  snap.snapshotId === `stampede/${snapName}:default` && snap.names.length === 1 && snap.names[0] === `stampede/${snapName}`,
  `createSnapshot({name}) -> ${JSON.stringify(snap)}`,
)
check((await nodeOf(sid)) === origin, 'the snapshotted sandbox keeps running where it was')
const bare = await Sandbox.createSnapshot(sid, opts)
check(bare.snapshotId.endsWith(':default') && bare.names.length === 0, `createSnapshot(id) -> ${JSON.stringify(bare)}`)
const listed = (await Sandbox.listSnapshots({ ...opts, sandboxId: sid }).nextItems()).map((i) => i.snapshotId)
check(
  listed.length === 2 && listed[0] === bare.snapshotId && listed[1] === snap.snapshotId,
  `listSnapshots of the sandbox, newest first: ${listed}`,
)
const byName = (await Sandbox.listSnapshots({ ...opts, name: snapName }).nextItems()).map((i) => i.snapshotId)
check(byName.length === 1 && byName[0] === snap.snapshotId, `listSnapshots({name}) -> ${byName}`)
const pages = Sandbox.listSnapshots({ ...opts, sandboxId: sid, limit: 1 })
const paged = []
for (let i = 0; i < 10 && pages.hasNext; i++) {
  paged.push(...(await pages.nextItems()).map((s) => s.snapshotId))
}
check(paged.join() === listed.join(), `listSnapshots({limit: 1}) pages through both: ${paged}`)
const fromSnap = await Sandbox.create(snap.snapshotId, { ...opts, timeoutMs: 60_000 })
check((await onNodes()).has(fromSnap.sandboxId), `a sandbox created from ${snap.snapshotId} runs`)
check((await Sandbox.kill(fromSnap.sandboxId, opts)) === true, 'kill the sandbox made from the snapshot')

const forks = await back.fork({ count: 2, timeoutMs: 60_000 })
check(forks.length === 2 && forks.every((f) => f instanceof Sandbox), `fork({count: 2}) -> 2 sandboxes`)
nodes = await onNodes()
check(forks.every((f) => nodes.has(f.sandboxId)), 'the forks run on the mock nodes')
check((await nodeOf(sid)) === origin, 'the forked sandbox keeps running where it was')

for (const f of forks) {
  check((await Sandbox.kill(f.sandboxId, opts)) === true, `kill fork ${f.sandboxId} -> true`)
}
check((await Sandbox.kill(sid, opts)) === true, `kill ${sid} -> true`)
await refused(() => Sandbox.connect(sid, { ...opts, timeoutMs: 60_000 }), 'connect to a killed sandbox -> not found')

// ---- what serve does not have -----------------------------------------------------
// A 404 on create is no "sandbox not found": the SDK throws its base SandboxError
// carrying the status and E2B's message (as it does for E2B's own unknown template).
try {
  await Sandbox.create('nosuchtemplate', { ...opts, timeoutMs: 60_000 })
  check(false, 'a create of an unknown template is refused')
} catch (e) {
  check(
    e.constructor === SandboxError && e.statusCode === 404 && e.message.includes("template 'nosuchtemplate' not found"),
    `unknown template -> ${e.constructor.name} (${e.statusCode}): ${e.message}`,
  )
}
// An E2B route serve lacks, on a live sandbox: 501 naming the route, which the SDK
// throws as its base SandboxError, not SandboxNotFoundError (as a 404 would be).
{
  const live = await Sandbox.create('base', { ...opts, timeoutMs: 60_000, metadata: { suite: 'js', run } })
  try {
    await live.updateNetwork({ allowOut: ['1.1.1.1'] })
    check(false, 'updateNetwork (a route serve lacks) is refused')
  } catch (e) {
    check(
      !(e instanceof SandboxNotFoundError) &&
        e instanceof SandboxError &&
        e.statusCode === 501 &&
        e.message.includes('PUT /sandboxes/{sandboxID}/network is not supported by stampede serve'),
      `updateNetwork -> ${e.constructor.name} (${e.statusCode}): ${e.message}`,
    )
  }
  check((await Sandbox.kill(live.sandboxId, opts)) === true, 'kill the sandbox of the unsupported call')
}

console.log('js SDK suite: all passed')
