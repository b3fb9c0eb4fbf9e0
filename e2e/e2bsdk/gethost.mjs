// E2B's getHost(port), unchanged SDK, against airlockd run with
// --preview-domain: a server started in the sandbox through the SDK is
// fetched at the host getHost returns, with the sandbox's traffic token
// or the tenant's key. The host name is resolved to airlockd's loopback
// address by the request's own lookup (no DNS). Run by
// e2bsdk_gethost_test.go with E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY,
// AIRLOCK_OTHER_KEY (another tenant's key) and AIRLOCK_PREVIEW_DOMAIN.
// Prints one line per check and exits non-zero on the first failure.
import assert from 'node:assert/strict'
import http from 'node:http'
import { Sandbox } from '@e2b/code-interpreter'

const api = new URL(process.env.E2B_API_URL)
const key = process.env.E2B_API_KEY
const otherKey = process.env.AIRLOCK_OTHER_KEY
const domain = process.env.AIRLOCK_PREVIEW_DOMAIN
let step = ''
const check = (name) => { step = name; console.log('check: ' + name) }

// get fetches http://host:<airlockd's port>/path, the name resolved to
// airlockd's address whatever it is.
function get(host, path, headers = {}) {
  const lookup = (name, opts, cb) => {
    if (opts && opts.all) cb(null, [{ address: api.hostname, family: 4 }])
    else cb(null, api.hostname, 4)
  }
  return new Promise((resolve, reject) => {
    const req = http.get({ host, port: api.port, path, headers, lookup, agent: false }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (d) => { body += d })
      res.on('end', () => resolve({ status: res.statusCode, type: res.headers['content-type'] || '', body }))
      res.on('error', reject)
    })
    req.on('error', reject)
  })
}

async function rest(method, path, k, body) {
  const res = await fetch(new URL(path, api), {
    method, headers: { Authorization: 'Bearer ' + k, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.text()
  assert.ok(res.ok, `${method} ${path}: ${res.status} ${text}`)
  return JSON.parse(text)
}

const problem = (r, status, slug) => {
  assert.equal(r.status, status, r.body)
  assert.match(r.type, /problem\+json/)
  assert.equal(JSON.parse(r.body).type.split('/').pop(), slug, r.body)
}

async function main() {
  // A key of its own, revoked at the end.
  check('a second key of the tenant')
  const k2 = await rest('POST', '/v1/keys', key, { name: 'gethost' })
  check('create')
  const sbx = await Sandbox.create({ apiKey: k2.key, timeoutMs: 120_000 })
  try {
    await withSandbox(sbx, k2)
  } finally {
    await Sandbox.kill(sbx.sandboxId, { apiKey: key }).catch(() => {})
  }
}

async function withSandbox(sbx, k2) {
  check('getHost is a preview host of the sandbox')
  const host = sbx.getHost(8000)
  assert.equal(host, `8000-${sbx.sandboxId}.${domain}`)
  assert.ok(sbx.trafficAccessToken, 'the sandbox has a traffic token')

  check('start a server in the sandbox')
  await sbx.commands.run('mkdir -p /home/user/site && echo "hello from the sandbox" > /home/user/site/hello.txt')
  await sbx.commands.run('cd /home/user/site && exec python3 -m http.server 8000 --bind 127.0.0.1', { background: true })

  check('fetch getHost(8000) with the traffic token')
  const tok = { 'E2B-Traffic-Access-Token': sbx.trafficAccessToken }
  let r
  for (let i = 0; i < 200; i++) {
    r = await get(host, '/hello.txt', tok)
    if (r.status !== 503) break // preview-port-closed until the server listens
    await new Promise((res) => setTimeout(res, 100))
  }
  assert.equal(r.status, 200, r.body)
  assert.equal(r.body, 'hello from the sandbox\n')

  check('fetch getHost(8000) with the key (Bearer)')
  r = await get(host, '/hello.txt', { Authorization: 'Bearer ' + k2.key })
  assert.equal(r.status, 200, r.body)
  assert.equal(r.body, 'hello from the sandbox\n')

  check('no credential: 401')
  problem(await get(host, '/hello.txt'), 401, 'preview-unauthorized')
  check('a forged traffic token: 401')
  problem(await get(host, '/hello.txt', { 'E2B-Traffic-Access-Token': sbx.trafficAccessToken.replace(/.$/, (c) => (c === '0' ? '1' : '0')) }), 401, 'preview-unauthorized')
  check('the envd token is not a traffic token: 401')
  problem(await get(host, '/hello.txt', { 'E2B-Traffic-Access-Token': sbx.envdAccessToken || 'x' }), 401, 'preview-unauthorized')
  check("another tenant's key: 404")
  problem(await get(host, '/hello.txt', { Authorization: 'Bearer ' + otherKey }), 404, 'session-not-found')
  check('a port nothing listens on: 503 problem')
  problem(await get(sbx.getHost(8001), '/', tok), 503, 'preview-port-closed')

  check('revoke the key the sandbox was made with: its token and the key are refused')
  await rest('DELETE', '/v1/keys/' + k2.key_id, key)
  problem(await get(host, '/hello.txt', tok), 401, 'preview-unauthorized')
  r = await get(host, '/hello.txt', { Authorization: 'Bearer ' + k2.key })
  assert.equal(r.status, 401, r.body)
  check('the tenant\'s other key still opens it')
  r = await get(host, '/hello.txt', { Authorization: 'Bearer ' + key })
  assert.equal(r.status, 200, r.body)
}

main().then(
  () => console.log('ok: all checks passed'),
  (e) => { console.error(`failed at "${step}":`, e); process.exit(1) },
)
