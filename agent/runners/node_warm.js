// The warm Node runtime of an Airlock sandbox. The agent starts it as
// `node -e <this> MODULE...`: it loads the modules, says "ready" on fd 3,
// and waits there for one JSON line {"path", "cwd"}. The sandbox is
// checkpointed while it waits and restored per request.
'use strict';
const net = require('net');
const crypto = require('crypto');
const Module = require('module');

for (const name of process.argv.slice(1)) {
  try {
    require(name);
  } catch (e) {
    console.error(`airlock: preload ${name}: ${e.message}`);
  }
}

const ctl = new net.Socket({ fd: 3, readable: true, writable: true });
let buf = '';
ctl.on('data', (chunk) => {
  buf += chunk;
  const nl = buf.indexOf('\n');
  if (nl < 0) return;
  ctl.removeAllListeners('data');
  ctl.destroy();
  const msg = JSON.parse(buf.slice(0, nl));

  // V8 seeds Math.random once per process, so clones of one snapshot would
  // share its sequence: replace it with one fed by the kernel's entropy.
  const pool = new Uint32Array(2048);
  let next = pool.length;
  Math.random = function random() {
    if (next + 2 > pool.length) {
      crypto.randomFillSync(pool);
      next = 0;
    }
    const hi = pool[next++] >>> 5; // 27 bits
    const lo = pool[next++] >>> 6; // 26 bits
    return (hi * 67108864 + lo) / 9007199254740992;
  };

  process.chdir(msg.cwd);
  process.argv = [process.argv[0], msg.path];
  Module.runMain();
});
ctl.write('ready\n');
