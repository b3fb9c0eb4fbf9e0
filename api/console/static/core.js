// Airlock console, the core: DOM and API helpers shared by every page.
// Everything the API returns is shown as text (never as HTML): program
// output, file names, key names and host names are chosen by others.
'use strict';

const KEY = 'airlock.console.key';
const apiRoot = new URL('../', location.href); // /console/ -> /
const main = document.getElementById('main');
const status = document.getElementById('status');

// h makes an element: attributes (on* as listeners) and children, where a
// string child is always a text node.
function h(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'style') Object.assign(e.style, v); // CSSOM: allowed by the page's CSP
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// show puts nodes in the main area (null and false are left out).
function show(...nodes) {
  main.replaceChildren(...nodes.flat(Infinity).filter(n => n !== null && n !== undefined && n !== false));
}

// key is the signed-in key: in this tab's session storage, never in a URL
// or in local storage.
function key() { return sessionStorage.getItem(KEY) || ''; }

function announce(text) { status.textContent = text; }

// Problem is a failed API call: the RFC 9457 document's title and detail.
class Problem extends Error {
  constructor(status, p) {
    super((p && (p.detail || p.title)) || `HTTP ${status}`);
    this.status = status;
    this.type = (p && p.type) || '';
    this.title = (p && p.title) || `HTTP ${status}`;
    this.detail = (p && p.detail) || '';
  }
}

function apiURL(path, params) {
  const u = new URL(path, apiRoot);
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') u.searchParams.set(k, v);
  }
  return u;
}

// call sends one request with the key in its Authorization header; a
// refusal of the key (401) signs out, unless the call is the sign-in's.
async function call(path, params, opts) {
  const { signingIn, ...rest } = opts || {};
  const resp = await fetch(apiURL(path, params), {
    ...rest,
    headers: { Authorization: 'Bearer ' + key(), Accept: 'application/json', ...((opts && opts.headers) || {}) },
    cache: 'no-store',
    credentials: 'omit',
    referrerPolicy: 'no-referrer',
  });
  if (!resp.ok) {
    let p = null;
    try { p = await resp.json(); } catch (_) { /* not a problem document */ }
    if (resp.status === 401 && !signingIn) signOut('The key was refused: sign in again.' + (p && p.detail ? ' (' + p.detail + ')' : ''));
    throw new Problem(resp.status, p);
  }
  return resp;
}

async function getJSON(path, params, signal) {
  return (await call(path, params, { signal })).json();
}

// send is a write: method, path and a JSON body (undefined: none). The
// answer's JSON, or null for 204.
async function send(method, path, body, params, signal) {
  const opts = { method, signal };
  if (body !== undefined) {
    opts.body = JSON.stringify(body);
    opts.headers = { 'Content-Type': 'application/json' };
  }
  const resp = await call(path, params, opts);
  if (resp.status === 204) return null;
  const text = await resp.text();
  return text ? JSON.parse(text) : null;
}

function when(t) {
  if (!t) return '';
  const d = new Date(t);
  return isNaN(d) ? String(t) : d.toLocaleString();
}

function ms(n) {
  if (n === undefined || n === null) return '';
  return n >= 10000 ? (n / 1000).toFixed(1) + ' s' : Math.round(n) + ' ms';
}

function bytes(n) {
  if (!n) return '0 B';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + ' ' + u[i];
}

// first is the first of a record's fields that is set (for fields whose
// name may change: the new name first, the old one after).
function first(o, ...names) {
  for (const n of names) if (o && o[n] !== undefined && o[n] !== null) return o[n];
  return undefined;
}

// memory renders a memory figure named name_bytes, or (the older name)
// name_mb in MiB.
function memory(o, name) {
  const b = first(o, name + '_bytes');
  if (b !== undefined) return bytes(b);
  const mb = first(o, name + '_mib', name + '_mb');
  return mb === undefined ? '' : bytes(mb * 1048576);
}

function badge(text) { return h('span', { class: 'badge ' + text }, text); }

// errorBox shows an error; a problem of the API with its title and detail.
function errorBox(err) {
  if (err instanceof Problem) {
    return h('div', { class: 'error problem', role: 'alert', 'data-status': err.status, 'data-type': err.type },
      h('strong', { class: 'problem-title' }, err.title),
      err.detail ? h('span', { class: 'problem-detail' }, ': ' + err.detail) : null,
      h('span', { class: 'muted' }, ` (HTTP ${err.status})`));
  }
  return h('div', { class: 'error', role: 'alert' }, err instanceof Error ? err.message : String(err));
}

function table(headers, rows, caption) {
  return h('div', { class: 'table-wrap' },
    h('table', {},
      caption ? h('caption', { class: 'visually-hidden' }, caption) : null,
      h('thead', {}, h('tr', {}, headers.map(([t, cls]) => h('th', { scope: 'col', class: cls }, t)))),
      h('tbody', {}, rows)));
}

function facts(list) {
  return h('dl', { class: 'facts' }, list.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

// action runs fn for a button: the button is busy meanwhile, and a failure
// is shown in box (the problem's title and detail). It resolves to fn's
// result, or undefined after a failure.
async function action(button, box, fn) {
  if (button.disabled) return undefined;
  const label = button.textContent;
  button.disabled = true;
  button.setAttribute('aria-busy', 'true');
  if (button.dataset.busy) button.textContent = button.dataset.busy;
  if (box) box.replaceChildren();
  try {
    return await fn();
  } catch (err) {
    if (err.name === 'AbortError') return undefined;
    if (box) box.replaceChildren(errorBox(err));
    announce('Failed: ' + err.message);
    return undefined;
  } finally {
    button.disabled = false;
    button.removeAttribute('aria-busy');
    button.textContent = label;
  }
}

// confirming is a button that asks before it acts: the first press shows
// "Yes, <verb>" and "Cancel" beside it.
function confirming(label, question, attrs, fn) {
  const wrap = h('span', { class: 'confirm' });
  const start = h('button', { type: 'button', class: 'danger', ...attrs, onclick: () => {
    const yes = h('button', { type: 'button', class: 'danger', 'data-confirm': 'yes', 'data-busy': label + '…' , onclick: () => fn(yes) }, 'Yes, ' + label.toLowerCase());
    const no = h('button', { type: 'button', class: 'quiet', onclick: () => { wrap.replaceChildren(start); start.focus(); } }, 'Cancel');
    wrap.replaceChildren(h('span', { class: 'question' }, question), ' ', yes, ' ', no);
    yes.focus();
  } }, label);
  wrap.append(start);
  return wrap;
}

// blobOf fetches bytes of the API with the key (images, downloads).
async function blobOf(path, params, signal) {
  return (await call(path, params, { signal, headers: { Accept: '*/*' } })).blob();
}

function download(blob, name) {
  const a = h('a', { href: URL.createObjectURL(blob), download: name.split('/').pop() || 'download' });
  document.body.append(a);
  a.click();
  setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
}

const inlineImage = t => ['image/png', 'image/jpeg', 'image/gif', 'image/webp'].includes(t);

// pager is a link to the next (older) page of a list, if there is one.
function pager(hashPath, cursor, label, extra) {
  if (!cursor) return null;
  const q = new URLSearchParams(extra || {});
  q.set('before', cursor);
  return h('p', { class: 'pager' }, h('a', { href: hashPath + '?' + q.toString(), rel: 'next' }, label));
}

// readEvents reads a response of server-sent events (each one JSON
// object on one data line) and calls handle(name, data) for each, until
// the stream ends; an event whose data is not JSON is skipped.
async function readEvents(resp, handle) {
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let name = 'message', data = '';
      for (const line of block.split('\n')) {
        if (line.startsWith('event: ')) name = line.slice(7);
        else if (line.startsWith('data: ')) data += line.slice(6);
      }
      if (!data) continue;
      let d;
      try { d = JSON.parse(data); } catch (_) { continue; /* a malformed event is skipped */ }
      handle(name, d);
    }
  }
}

// chunkBytes is the bytes of an output event: {data} (text) or
// {data_b64} (other bytes).
function chunkBytes(d) {
  if (d.data_b64) return Uint8Array.from(atob(d.data_b64), c => c.charCodeAt(0));
  return new TextEncoder().encode(d.data || '');
}

// secretBox shows a secret the API gives once (a new key's, a new
// webhook's signing secret): read-only, selected, with a copy button and
// a Done button that drops it from the page. id names the input.
function secretBox(box, id, label, message, secret) {
  const input = h('input', { id, readonly: true, value: secret, 'aria-label': label, spellcheck: 'false', autocomplete: 'off' });
  const copied = h('span', { class: 'muted', role: 'status', id: id + '-copied' });
  const copy = h('button', { type: 'button', id: id + '-copy', onclick: async () => {
    input.focus();
    input.select();
    try {
      await navigator.clipboard.writeText(input.value);
      copied.textContent = 'Copied.';
    } catch (_) {
      copied.textContent = 'Selected: press Ctrl+C (or ⌘C) to copy.';
    }
    announce(copied.textContent);
  } }, 'Copy');
  box.replaceChildren(h('div', { class: 'card secret', role: 'status' },
    h('p', {}, message),
    input,
    h('div', { class: 'actions' }, copy, h('button', { type: 'button', class: 'quiet', onclick: () => { box.replaceChildren(); } }, 'Done'), copied)));
  input.focus();
  input.select();
}
