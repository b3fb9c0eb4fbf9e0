// The E2B series of scripts/bench-speed.sh: Sandbox.create() of the code
// interpreter to the first runCode('print(1)') result, per sandbox, one
// after another and killed after each, alternating between the targets
// so that every target sees the same load. With a rate R (sandboxes a
// second, all targets together), one starts every 1/R s instead of back
// to back: the moderate pace of the speed targets.
// Usage: E2B_TARGETS="before=http://127.0.0.1:18084=e2b_...,after=http://127.0.0.1:18082=e2b_..." node bench-ab.mjs [sandboxes per target=30] [rate]
import { Sandbox } from '@e2b/code-interpreter'

const n = Number(process.argv[2] ?? 30)
const rate = Number(process.argv[3] ?? 0)
const targets = (process.env.E2B_TARGETS ?? '').split(',').filter(Boolean).map((t) => {
  const [label, url, key] = t.split('=')
  return { label, url, key, times: [] }
})
if (targets.length === 0) throw new Error('set E2B_TARGETS to label=url=key,...')

function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]
}

let nextAt = performance.now()
for (let i = 0; i < n; i++) {
  for (const t of targets) {
    if (rate > 0) {
      const wait = nextAt - performance.now()
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
      nextAt += 1000 / rate
    }
    const opts = { apiKey: t.key, apiUrl: t.url, sandboxUrl: t.url }
    const t0 = performance.now()
    const sbx = await Sandbox.create(opts)
    const r = await sbx.runCode('print(1)')
    t.times.push(performance.now() - t0)
    if (r.logs.stdout.join('') !== '1\n') throw new Error('unexpected output ' + JSON.stringify(r.logs))
    await sbx.kill()
  }
}
for (const t of targets) {
  const x = t.times
  console.log(`${t.label}: Sandbox.create() to first runCode result: n=${x.length} p50=${pct(x, 50).toFixed(1)} p90=${pct(x, 90).toFixed(1)} p99=${pct(x, 99).toFixed(1)} min=${Math.min(...x).toFixed(1)} max=${Math.max(...x).toFixed(1)} ms`)
}
