// The E2B benchmark of BENCHMARKS.md, through the SDK against airlockd:
//   create: Sandbox.create() to the first runCode result, per sandbox
//   (sandboxes made one after another and killed after each);
//   round trip: runCode('print(1)') in one sandbox, one after another.
// Usage (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY set):
//   node bench.mjs [sandboxes=20] [cells=200]
import { Sandbox } from '@e2b/code-interpreter'

const creates = Number(process.argv[2] ?? 20)
const cells = Number(process.argv[3] ?? 200)

function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]
}
const fmt = (xs) => `n=${xs.length} p50=${pct(xs, 50).toFixed(1)} ms p99=${pct(xs, 99).toFixed(1)} ms min=${Math.min(...xs).toFixed(1)} ms max=${Math.max(...xs).toFixed(1)} ms`

const firstResult = []
for (let i = 0; i < creates; i++) {
  const t0 = performance.now()
  const sbx = await Sandbox.create()
  const r = await sbx.runCode('print(1)')
  firstResult.push(performance.now() - t0)
  if (r.logs.stdout.join('') !== '1\n') throw new Error('unexpected output ' + JSON.stringify(r.logs))
  await sbx.kill()
}
console.log('Sandbox.create() to first runCode result: ' + fmt(firstResult))

const sbx = await Sandbox.create()
const rt = []
try {
  for (let i = 0; i < cells; i++) {
    const t0 = performance.now()
    const r = await sbx.runCode('print(1)')
    rt.push(performance.now() - t0)
    if (r.logs.stdout.join('') !== '1\n') throw new Error('unexpected output ' + JSON.stringify(r.logs))
  }
} finally {
  await sbx.kill()
}
console.log("runCode('print(1)') round trip: " + fmt(rt.slice(1)) + ' (first, which makes the default context, ' + rt[0].toFixed(1) + ' ms)')
