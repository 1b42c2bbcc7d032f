// The official E2B JS SDK (`npm install e2b`) against `stampede serve`.
// Environment: E2B_API_URL, E2B_API_KEY, MOCK_ADMIN (mock-node fleet admin URL).
import { Sandbox, AuthenticationError } from 'e2b'
import { randomUUID } from 'node:crypto'

const apiUrl = process.env.E2B_API_URL
const mockAdmin = process.env.MOCK_ADMIN
const run = randomUUID().slice(0, 8)
const opts = { apiUrl }

function check(cond, what) {
  console.log((cond ? 'ok   ' : 'FAIL ') + what)
  if (!cond) process.exit(1)
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
console.log('js SDK suite: all passed')
