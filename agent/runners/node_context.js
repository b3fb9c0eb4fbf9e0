// The Node code context of an Airlock session: a persistent interpreter
// the agent starts as `node -e <this>`. It speaks JSON lines: cells
// {"code", "mark"} arrive on fd 3, results go to fd 4 (first
// {"ready": true}, then {"value", "error", "outputs"} per cell). Output goes
// to fd 1 and 2 as it happens (synchronous for pipes on Linux); the mark
// written to both ends each cell's output.
//
// Cells run in this one global context, so globals persist between cells;
// a cell's completion value comes back as text (a promise is awaited
// first). SIGINT interrupts the running cell and the context lives on.
// Everything is inside a function: `node -e` runs this as a script in the
// global scope the cells share, and a cell's own top-level `const fs`
// must not collide with the runner's names.
(function airlockContext() {
  'use strict';
  const fs = require('fs');
  const net = require('net');
  const vm = require('vm');
  const util = require('util');
  const readline = require('readline');

  globalThis.require = require;
  globalThis.module = module;

  let interrupt = null;
  process.on('SIGINT', () => {
    if (interrupt) interrupt();
  });

  function send(msg) {
    fs.writeSync(4, JSON.stringify(msg) + '\n');
  }

  // cellStack leaves this runner's frames out of a stack trace.
  function cellStack(stack) {
    const lines = String(stack || '').split('\n');
    const i = lines.findIndex((l) => /^\s+at /.test(l) && /node:vm|\[eval\]|node:internal/.test(l));
    if (i > 0) lines.length = i;
    return lines.join('\n');
  }

  function errorOf(e) {
    if (e !== null && typeof e === 'object') {
      let name = e.name || 'Error';
      if (e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') name = 'Interrupted';
      return {
        name: String(name),
        value: String(e.message === undefined ? e : e.message).slice(0, 65536),
        traceback: cellStack(e.stack).slice(-65536),
      };
    }
    return { name: typeof e, value: String(e).slice(0, 65536), traceback: '' };
  }

  let count = 0;

  async function runCell(msg) {
    count++;
    let value = null;
    let error = null;
    try {
      let v = vm.runInThisContext(msg.code, { filename: `<cell ${count}>`, breakOnSigint: true });
      if (v !== null && typeof v === 'object' && typeof v.then === 'function') {
        v = await Promise.race([
          v,
          new Promise((_, reject) => {
            interrupt = () => {
              const e = new Error('Script execution interrupted.');
              e.code = 'ERR_SCRIPT_EXECUTION_INTERRUPTED';
              reject(e);
            };
          }),
        ]);
      }
      if (v !== undefined) value = util.inspect(v, { depth: 4, maxArrayLength: 200 }).slice(0, 1 << 20);
    } catch (e) {
      error = errorOf(e);
    } finally {
      interrupt = null;
    }
    for (const fd of [1, 2]) {
      try {
        fs.writeSync(fd, msg.mark);
      } catch (e) {
        // the cell closed its own output
      }
    }
    send({ value, error, outputs: [] });
  }

  let queue = Promise.resolve();
  // A socket, not fs.createReadStream: a thread-pool read blocked on fd 3
  // would hold process.exit() until the agent closes the pipe.
  const rl = readline.createInterface({ input: new net.Socket({ fd: 3, readable: true, writable: false }), crlfDelay: Infinity });
  rl.on('line', (line) => {
    const msg = JSON.parse(line);
    queue = queue.then(() => runCell(msg));
  });
  rl.on('close', () => queue.then(() => process.exit(0)));
  send({ ready: true });
})();
