// E2B's own SDK, unchanged, against airlockd. Needs E2B_API_URL and
// E2B_SANDBOX_URL (both airlockd's address) and E2B_API_KEY (a tenant's
// key); see README.md. Run with `npm ci && node hello.mjs`.
import { Sandbox } from '@e2b/code-interpreter'

const sbx = await Sandbox.create()
try {
  const cmd = await sbx.commands.run('echo "hi from $(pwd)"')
  console.log(cmd.stdout.trim())
  const cell = await sbx.runCode('import math\nmath.factorial(10)')
  console.log(`10! = ${cell.text}`)
} finally {
  await sbx.kill()
}
