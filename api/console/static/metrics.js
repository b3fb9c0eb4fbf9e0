// Airlock console: the resource chart of a session, drawn from
// GET /v1/sessions/{id}/metrics as plain SVG made with DOM calls (no
// markup strings, so the page's Trusted Types policy holds).
'use strict';

const SVGNS = 'http://www.w3.org/2000/svg';

// s makes an SVG element with attributes.
function s(tag, attrs, ...children) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

// metricSeries turns samples into the four series the chart shows: CPU
// in percent of the limit, memory and disk in MiB, and network in bytes
// per second between samples (the API's counters are totals).
function metricSeries(samples) {
  const t = samples.map(x => new Date(x.at).getTime());
  const rate = (k) => samples.map((x, i) => {
    if (i === 0) return 0;
    const dt = (t[i] - t[i - 1]) / 1000, d = x[k] - samples[i - 1][k];
    return dt > 0 && d > 0 ? d / dt : 0;
  });
  const rx = rate('net_rx_bytes'), tx = rate('net_tx_bytes');
  return [
    { id: 'cpu', title: 'CPU (% of limit)', unit: '%', t, v: samples.map(x => x.cpu_pct), max: 100 },
    { id: 'memory', title: 'Memory (MiB)', unit: 'MiB', t, v: samples.map(x => x.memory_bytes / 1048576) },
    { id: 'disk', title: 'Disk (MiB)', unit: 'MiB', t, v: samples.map(x => x.disk_bytes / 1048576) },
    { id: 'net', title: 'Network (bytes/s, in + out)', unit: 'B/s', t, v: rx.map((r, i) => r + tx[i]) },
  ];
}

// lineChart draws one series as a small SVG line chart with its last
// value and its peak in words (for screen readers too).
function lineChart(ser) {
  const W = 320, H = 90, P = 4;
  const last = ser.v.length ? ser.v[ser.v.length - 1] : 0;
  const peakV = ser.v.reduce((a, b) => Math.max(a, b), 0);
  const top = Math.max(ser.max || 0, peakV, 1e-9);
  const t0 = ser.t[0] || 0, span = Math.max((ser.t[ser.t.length - 1] || 0) - t0, 1);
  const pts = ser.v.map((v, i) => `${(P + (W - 2 * P) * (ser.t[i] - t0) / span).toFixed(1)},${(H - P - (H - 2 * P) * v / top).toFixed(1)}`);
  const fmt = (v) => (v >= 100 ? Math.round(v) : v.toFixed(1)) + ' ' + ser.unit;
  const label = `${ser.title}: now ${fmt(last)}, peak ${fmt(peakV)}`;
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img', 'aria-label': label, class: 'metric-chart', 'data-metric': ser.id },
    s('title', {}, label),
    s('rect', { x: 0, y: 0, width: W, height: H, fill: 'none', stroke: 'currentColor', 'stroke-opacity': 0.2 }),
    pts.length > 1 ? s('polyline', { points: pts.join(' '), fill: 'none', stroke: 'currentColor', 'stroke-width': 1.5 }) : s('g', {}));
  return h('figure', { class: 'metric' }, svg, h('figcaption', {}, label));
}

// renderMetrics fills box with the session's charts, and while live
// redraws them every 5 s until signal aborts.
async function renderMetrics(id, box, live, signal) {
  const draw = async () => {
    const m = await getJSON('v1/sessions/' + encodeURIComponent(id) + '/metrics', null, signal);
    const samples = m.samples || [];
    if (!samples.length) {
      box.replaceChildren(h('p', { class: 'muted' }, live ? 'No samples yet: the first comes within a few seconds.' : 'No samples were kept for this session.'));
      return;
    }
    box.replaceChildren(h('p', { class: 'muted' }, `${samples.length} samples, ${when(samples[0].at)} to ${when(samples[samples.length - 1].at)}.`),
      h('div', { class: 'metric-grid' }, metricSeries(samples).map(lineChart)));
  };
  try {
    await draw();
    while (live && !signal.aborted) {
      await new Promise((res) => {
        const t = setTimeout(res, 5000);
        signal.addEventListener('abort', () => { clearTimeout(t); res(); }, { once: true });
      });
      if (!signal.aborted) await draw();
    }
  } catch (e) {
    if (!signal.aborted) box.replaceChildren(h('p', { class: 'muted' }, 'Metrics could not be read: ' + (e.message || e)));
  }
}
