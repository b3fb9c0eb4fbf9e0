// The E2B SDKs, unchanged, against airlockd: every call below goes to the
// server named by E2B_API_URL and E2B_SANDBOX_URL. Run by e2bsdk_test.go
// with E2B_API_KEY (a tenant's key) and AIRLOCK_OTHER_KEY (another
// tenant's). Prints one line per check and exits non-zero on the first
// failure.
import assert from 'node:assert/strict'
import { Sandbox, CommandExitError, NotFoundError, SandboxError, TimeoutError } from '@e2b/code-interpreter'

const api = process.env.E2B_API_URL
const otherKey = process.env.AIRLOCK_OTHER_KEY
let step = ''
const check = (name) => { step = name; console.log('check: ' + name) }

async function main() {
  check('create')
  const sbx = await Sandbox.create({ timeoutMs: 120_000, metadata: { suite: 'e2bsdk', run: process.pid.toString() } })
  assert.ok(sbx.sandboxId)
  try {
    await withSandbox(sbx)
  } catch (e) {
    await sbx.kill().catch(() => {})
    throw e
  }
}

async function withSandbox(sbx) {
  check('commands.run echo')
  const r = await sbx.commands.run('echo hi')
  assert.equal(r.stdout, 'hi\n')
  assert.equal(r.exitCode, 0)

  check('commands.run in /home/user with env')
  const pwd = await sbx.commands.run('pwd; echo $GREETING', { envs: { GREETING: 'hello' } })
  assert.equal(pwd.stdout, '/home/user\nhello\n')

  check('exit 3 raises CommandExitError')
  await assert.rejects(sbx.commands.run('exit 3'), (e) => e instanceof CommandExitError && e.exitCode === 3)

  check('streamed output callbacks')
  const seen = []
  await sbx.commands.run('echo out; echo err >&2', { onStdout: (d) => seen.push('o:' + d), onStderr: (d) => seen.push('e:' + d) })
  assert.ok(seen.includes('o:out\n') && seen.includes('e:err\n'), JSON.stringify(seen))

  check('background command with stdin, listed, then killed')
  const bg = await sbx.commands.run('cat > fed.txt; sleep 600', { background: true, stdin: true })
  assert.ok(bg.pid > 0)
  await sbx.commands.sendStdin(bg.pid, 'fed through stdin\n')
  await sbx.commands.closeStdin(bg.pid)
  const listed = await sbx.commands.list()
  assert.ok(listed.some((p) => p.pid === bg.pid && p.cmd === '/bin/bash'), JSON.stringify(listed))
  for (let i = 0; i < 100 && (await sbx.files.read('fed.txt').catch(() => '')) !== 'fed through stdin\n'; i++) {
    await new Promise((res) => setTimeout(res, 100))
  }
  assert.equal(await sbx.files.read('fed.txt'), 'fed through stdin\n')
  assert.equal(await sbx.commands.kill(bg.pid), true)
  await assert.rejects(bg.wait(), (e) => e instanceof CommandExitError)
  assert.equal(await sbx.commands.kill(bg.pid), false)

  check('connect to a running command')
  const slow = await sbx.commands.run('sleep 1; echo late', { background: true })
  const joined = await sbx.commands.connect(slow.pid)
  assert.equal((await joined.wait()).stdout, 'late\n')
  assert.equal((await slow.wait()).stdout, 'late\n')

  check('pty: create, send input, read output, resize, kill')
  let ptyOut = ''
  const utf8 = new TextDecoder()
  const term = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { ptyOut += utf8.decode(d, { stream: true }) } })
  assert.ok(term.pid > 0)
  const ptyShows = async (text) => {
    for (let i = 0; i < 300 && !ptyOut.includes(text); i++) {
      await new Promise((res) => setTimeout(res, 100))
    }
    assert.ok(ptyOut.includes(text), `no ${JSON.stringify(text)} in ${JSON.stringify(ptyOut.slice(-500))}`)
  }
  await sbx.pty.sendInput(term.pid, new TextEncoder().encode('echo pty-$((6*7))\n'))
  await ptyShows('pty-42\r\n')
  await sbx.pty.resize(term.pid, { cols: 120, rows: 40 })
  await sbx.pty.sendInput(term.pid, new TextEncoder().encode('stty size\n'))
  await ptyShows('40 120\r\n')
  assert.equal(await sbx.pty.kill(term.pid), true)
  await assert.rejects(term.wait(), (e) => e instanceof CommandExitError)
  assert.equal(await sbx.pty.kill(term.pid), false)

  check('commands.run past its timeoutMs raises TimeoutError, and the command is killed')
  await assert.rejects(sbx.commands.run('exec sleep 60', { timeoutMs: 2000 }), (e) => e instanceof TimeoutError)
  const sleeping = async () => (await sbx.commands.list()).some((p) => p.args.includes('exec sleep 60'))
  for (let i = 0; i < 100 && (await sleeping()); i++) {
    await new Promise((res) => setTimeout(res, 100))
  }
  assert.equal(await sleeping(), false)

  check('files write, read, exists, list, makeDir, rename, remove')
  const w = await sbx.files.write('hello.txt', 'hello')
  assert.equal(w.path, '/home/user/hello.txt')
  assert.equal(await sbx.files.read('/home/user/hello.txt'), 'hello')
  assert.equal(await sbx.files.exists('hello.txt'), true)
  assert.equal(await sbx.files.exists('nope.txt'), false)
  const entries = await sbx.files.list('.')
  assert.ok(entries.some((e) => e.name === 'hello.txt' && e.type === 'file' && e.path === '/home/user/hello.txt'), JSON.stringify(entries))
  assert.equal(await sbx.files.makeDir('d/e'), true)
  assert.equal(await sbx.files.makeDir('d/e'), false)
  const moved = await sbx.files.rename('hello.txt', 'd/e/moved.txt')
  assert.equal(moved.path, '/home/user/d/e/moved.txt')
  assert.equal(await sbx.files.exists('hello.txt'), false)
  const deep = await sbx.files.list('d', { depth: 2 })
  assert.deepEqual(deep.map((e) => e.path).sort(), ['/home/user/d/e', '/home/user/d/e/moved.txt'])
  const info = await sbx.files.getInfo('d/e/moved.txt')
  assert.equal(info.size, 5)
  await sbx.files.remove('d')
  assert.equal(await sbx.files.exists('d'), false)
  const many = await sbx.files.write([{ path: 'm/a.txt', data: 'A' }, { path: '/tmp/b.bin', data: new Uint8Array([0, 1, 2]) }])
  assert.deepEqual(many.map((e) => e.path), ['/home/user/m/a.txt', '/tmp/b.bin'])
  assert.deepEqual([...(await sbx.files.read('/tmp/b.bin', { format: 'bytes' }))], [0, 1, 2])
  await assert.rejects(sbx.files.read('missing.txt'), (e) => e.name === 'FileNotFoundError' || e instanceof NotFoundError)

  check('runCode print(1)')
  const p = await sbx.runCode('print(1)')
  assert.deepEqual(p.logs.stdout, ['1\n'])

  check('runCode 1+1 main result')
  const two = await sbx.runCode('1+1')
  assert.equal(two.text, '2')

  check('runCode matplotlib plt.show() gives a PNG')
  const plot = await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.show()')
  const png = plot.results.find((x) => x.png)
  assert.ok(png, JSON.stringify(plot.results.map((x) => x.formats())))
  assert.equal(Buffer.from(png.png, 'base64').subarray(0, 4).toString('latin1'), '\x89PNG')

  check('runCode 1/0 gives ZeroDivisionError')
  const z = await sbx.runCode('1/0')
  assert.equal(z.error?.name, 'ZeroDivisionError')

  check('runCode sees files written through the files API')
  await sbx.files.write('data.csv', 'a,b\n1,2\n')
  const rd = await sbx.runCode("open('/home/user/data.csv').read()")
  assert.equal(rd.text, "'a,b\\n1,2\\n'")

  check('created context keeps variables')
  const ctx = await sbx.createCodeContext()
  await sbx.runCode('x = 41', { context: ctx })
  const x = await sbx.runCode('x + 1', { context: ctx })
  assert.equal(x.text, '42')
  const other = await sbx.runCode('x', { language: 'python' })
  assert.equal(other.error?.name, 'NameError')
  const js = await sbx.runCode('[1, 2].map((v) => v * 2)', { language: 'js' })
  assert.ok(js.text && js.text.includes('2') && js.text.includes('4'), JSON.stringify(js))

  check('list (paged by limit), setTimeout, getInfo')
  const page = await Sandbox.list({ query: { metadata: { suite: 'e2bsdk' } } }).nextItems()
  assert.ok(page.some((s) => s.sandboxId === sbx.sandboxId), JSON.stringify(page))
  const none = await Sandbox.list({ query: { metadata: { suite: 'no-such-suite' } } }).nextItems()
  assert.equal(none.length, 0)
  await sbx.setTimeout(60_000)
  const gi = await sbx.getInfo()
  assert.equal(gi.sandboxId, sbx.sandboxId)
  assert.equal(gi.state, 'running')
  assert.equal(gi.metadata.suite, 'e2bsdk')
  assert.ok(gi.endAt.getTime() - Date.now() <= 61_000 && gi.endAt.getTime() - Date.now() > 30_000, gi.endAt.toISOString())
  const second = await Sandbox.create('base', { timeoutMs: 60_000, metadata: { suite: 'e2bsdk', run: process.pid.toString() } })
  try {
    const pager = Sandbox.list({ limit: 1, query: { metadata: { run: process.pid.toString() } } })
    const ids = []
    for (let pages = 0; pager.hasNext && pages < 5; pages++) {
      ids.push(...(await pager.nextItems()).map((s) => s.sandboxId))
    }
    assert.deepEqual(ids.sort(), [sbx.sandboxId, second.sandboxId].sort())
  } finally {
    await second.kill()
  }
  const again = await Sandbox.connect(sbx.sandboxId)
  assert.equal((await again.commands.run('cat /home/user/data.csv')).stdout, 'a,b\n1,2\n')

  check('getMetrics')
  let metrics = []
  for (let i = 0; i < 100 && metrics.length < 2; i++) {
    metrics = await sbx.getMetrics()
    if (metrics.length < 2) await new Promise((res) => setTimeout(res, 100))
  }
  assert.ok(metrics.length >= 2, JSON.stringify(metrics))
  const m = metrics[metrics.length - 1]
  assert.ok(m.timestamp instanceof Date && m.cpuCount >= 1 && m.cpuUsedPct >= 0 && m.memUsed > 0 && m.memTotal >= m.memUsed && m.diskUsed > 0 && m.diskTotal > m.diskUsed, JSON.stringify(m))
  const later = await sbx.getMetrics({ start: new Date(Date.now() + 3600_000) })
  assert.equal(later.length, 0)

  check('updateNetwork on a sandbox made without a network')
  await sbx.updateNetwork({ allowInternetAccess: false })
  await assert.rejects(sbx.updateNetwork({ allowOut: ['example.test'] }), (e) => e instanceof SandboxError && /without a network/.test(e.message))

  check('negative: wrong access token 401, another tenant 404, no key 401')
  const bad = await fetch(process.env.E2B_SANDBOX_URL + '/filesystem.Filesystem/Stat', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'Connect-Protocol-Version': '1', 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983', 'X-Access-Token': 'wrong' },
    body: JSON.stringify({ path: '/home/user' }),
  })
  assert.equal(bad.status, 401)
  assert.equal((await bad.json()).code, 'unauthenticated')
  const foreign = await fetch(api + '/sandboxes/' + sbx.sandboxId, { headers: { 'X-API-KEY': otherKey } })
  assert.equal(foreign.status, 404)
  assert.equal((await foreign.json()).code, 404)
  await assert.rejects(Sandbox.connect(sbx.sandboxId, { apiKey: otherKey }), (e) => e.name === 'SandboxNotFoundError' || e instanceof NotFoundError)
  const nokey = await fetch(api + '/v2/sandboxes')
  assert.equal(nokey.status, 401)
  assert.equal((await nokey.json()).code, 401)

  check('kill true, kill again false, isRunning false')
  assert.equal(await sbx.isRunning(), true)
  assert.equal(await Sandbox.kill(sbx.sandboxId), true)
  assert.equal(await Sandbox.kill(sbx.sandboxId), false)
  assert.equal(await sbx.isRunning(), false)
}

main().then(
  () => console.log('ok: all checks passed'),
  (e) => {
    console.error('FAILED at check "' + step + '":', e)
    process.exit(1)
  },
)
