// Airlock console, the terminal of a session: a PTY over a WebSocket,
// drawn by the vendored xterm.js (vendor/VERSION). The key goes as the
// WebSocket subprotocol "bearer.<key>" (a browser cannot set headers on
// a WebSocket); the terminal's output is written to xterm as bytes, never
// into the page's DOM as HTML.
'use strict';

const PTY_COLS = 100, PTY_ROWS = 30;

function terminalSection(s, signal) {
  const sid = s.session_id;
  const err = h('div', { id: 'terminal-error' });
  const state = h('p', { class: 'muted', id: 'terminal-state' }, 'No terminal is open.');
  const screen = h('div', { id: 'terminal', class: 'terminal', hidden: true });
  let ws = null, term = null, ptyID = '';

  const close = () => {
    if (ws) ws.close(1000, 'detach');
    ws = null;
  };
  signal.addEventListener('abort', close);

  const open = async () => {
    close();
    ptyID = (await send('POST', 'v1/sessions/' + encodeURIComponent(sid) + '/pty', { cols: PTY_COLS, rows: PTY_ROWS })).pty_id;
    if (term) term.dispose();
    term = new Terminal({ cols: PTY_COLS, rows: PTY_ROWS, convertEol: false, scrollback: 2000 });
    screen.hidden = false;
    term.open(screen);
    const u = apiURL('v1/sessions/' + encodeURIComponent(sid) + '/pty/' + encodeURIComponent(ptyID));
    u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
    ws = new WebSocket(u, ['airlock.pty', 'bearer.' + key()]);
    ws.binaryType = 'arraybuffer';
    const enc = new TextEncoder();
    ws.onopen = () => { state.textContent = `Terminal ${ptyID} is open.`; term.focus(); };
    ws.onmessage = (m) => { if (m.data instanceof ArrayBuffer) term.write(new Uint8Array(m.data)); };
    ws.onclose = (ev) => {
      state.textContent = ev.reason ? `The terminal closed: ${ev.reason}.` : 'The terminal closed.';
      announce(state.textContent);
    };
    term.onData((d) => { if (ws && ws.readyState === WebSocket.OPEN) ws.send(enc.encode(d)); });
    term.onResize(({ cols, rows }) => {
      if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ resize: [cols, rows] }));
    });
  };

  const end = async () => {
    if (ptyID) await send('DELETE', 'v1/sessions/' + encodeURIComponent(sid) + '/pty/' + encodeURIComponent(ptyID));
  };

  const openB = h('button', { type: 'button', id: 'terminal-open', onclick: () => action(openB, err, open) }, 'Open terminal');
  const endB = h('button', { type: 'button', id: 'terminal-end', class: 'quiet', onclick: () => action(endB, err, end) }, 'End terminal');
  return h('section', { 'aria-labelledby': 'terminal-h' }, h('h2', { id: 'terminal-h' }, 'Terminal'),
    h('div', { class: 'actions' }, openB, endB), err, state, screen);
}
