// Kiln's dashboard: polls the JSON API (docs/dashboard-api.md) every 2 s and redraws. No
// framework, no external code: DOM built with h(), charts drawn as inline SVG.
"use strict";

const POLL_MS = 2000;
const TOKEN_KEY = "kiln-token";
const $ = (id) => document.getElementById(id);
const SVG_NS = "http://www.w3.org/2000/svg";

// --- small helpers ---------------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") el.textContent = v;
    else el.setAttribute(k, v);
  }
  for (const c of children.flat()) if (c) el.append(c);
  return el;
}

function fmtNum(x, digits = 3) {
  if (x === null || x === undefined || !isFinite(x)) return "–";
  if (x === 0) return "0";
  const a = Math.abs(x);
  if (a >= 1000) return Math.round(x).toLocaleString("en-US");
  return Number(x.toPrecision(digits)).toString();
}

function fmtLatency(ms) {
  if (ms === null || ms === undefined) return "–";
  if (ms < 1) return fmtNum(ms * 1000) + " µs";
  if (ms < 1000) return fmtNum(ms) + " ms";
  return fmtNum(ms / 1000) + " s";
}

function fmtUs(us) {
  if (us === null || us === undefined) return "–";
  return us < 1000 ? fmtNum(us) + " µs" : fmtLatency(us / 1000);
}

function fmtDuration(sec) {
  if (sec === null || sec === undefined || !isFinite(sec)) return "–";
  sec = Math.max(0, Math.round(sec));
  if (sec < 60) return sec + " s";
  const m = Math.floor(sec / 60), r = sec % 60;
  if (m < 60) return m + " min" + (r ? " " + r + " s" : "");
  const hr = Math.floor(m / 60);
  return hr + " h " + (m % 60) + " min";
}

function fmtTime(ms) {
  const d = new Date(ms);
  return d.toLocaleTimeString("en-GB", { hour12: false });
}

function ago(ms, now) {
  return fmtDuration((now - ms) / 1000) + " ago";
}

function replace(el, ...children) {
  el.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined));
}

function show(el, yes) { el.classList.toggle("hidden", !yes); }

// --- the API ---------------------------------------------------------------------------------

class Unauthorized extends Error {}

async function api(path) {
  const headers = {};
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers["Authorization"] = "Bearer " + token;
  const resp = await fetch(path, { headers, cache: "no-store" });
  let body = null;
  try { body = await resp.json(); } catch (e) { /* not JSON */ }
  if (resp.status === 401) throw new Unauthorized(body && body.error ? body.error : "token needed");
  if (!resp.ok) throw new Error((body && body.error) || path + ": HTTP " + resp.status);
  return body;
}

// --- state -----------------------------------------------------------------------------------

const state = { selected: null, updates: 0, lastOk: 0, jobs: [] };

function selectedFromHash() {
  const m = /job=(\d+)/.exec(location.hash);
  return m ? Number(m[1]) : null;
}

// --- rendering: summary ------------------------------------------------------------------------

function renderSummary(farm, jobs) {
  const perMin = farm.keys.reduce((a, k) => a + k.measures_per_minute, 0);
  const items = [
    ["Devices", farm.devices.length],
    ["Busy", farm.keys.reduce((a, k) => a + k.busy, 0)],
    ["Measures / min", perMin],
    ["Waiting measures", farm.keys.reduce((a, k) => a + k.queue_depth, 0)],
    ["Running jobs", farm.jobs.running],
    ["Queued", farm.jobs.queued],
    ["Done", farm.jobs.done],
  ];
  replace($("summary"), items.map(([k, v]) =>
    h("div", { class: "item" }, h("span", { class: "v", text: fmtNum(v) }), h("span", { class: "k", text: k }))));
}

// --- rendering: devices ----------------------------------------------------------------------

function errorChips(errors) {
  const kinds = Object.entries(errors || {}).filter(([, n]) => n > 0);
  if (!kinds.length) return h("span", { class: "chip ok", text: "no errors" });
  return h("span", { class: "chips" },
    kinds.map(([k, n]) => h("span", { class: "chip", "data-kind": k, text: k.replace(/_/g, " ") + " " + n })));
}

// A job's latency is the model's estimate (every task's best kernel time times its calls, a
// prediction from similar tasks while one is unmeasured): while tasks remain, say so.
function partialTasks(j) {
  return j.best_latency_ms && j.tasks_total && j.tasks_done < j.tasks_total
    ? " (est., " + j.tasks_done + " of " + j.tasks_total + " tasks done)" : "";
}

function renderFarm(farm) {
  show($("devices-empty"), farm.devices.length === 0);
  $("devices-count").textContent = farm.devices.length ? farm.devices.length + " registered" : "";
  const byKey = new Map();
  for (const d of farm.devices) {
    if (!byKey.has(d.key)) byKey.set(d.key, []);
    byKey.get(d.key).push(d);
  }
  replace($("keys"), farm.keys.map((k) => {
    const head = h("div", { class: "key-head" },
      h("span", { class: "key-name", text: k.key }),
      // A busy device is online too: "1 online · 1 busy", never "0 online · 1 busy".
      h("span", { class: "badge " + (k.online + k.busy ? "s-online" : "s-waiting"), title: "devices connected: idle or measuring", text: (k.online + k.busy) + " online" }),
      k.busy ? h("span", { class: "badge s-busy", text: k.busy + " busy" }) : null,
      k.quarantined ? h("span", { class: "badge s-quarantined", text: k.quarantined + " quarantined" }) : null,
      k.queue_depth ? h("span", { class: "badge s-queued", title: "measure requests waiting for a device", text: k.queue_depth + " waiting" }) : null,
      h("span", { class: "count" }, h("b", { text: fmtNum(k.measures_per_minute) }), " /min"));
    const rows = (byKey.get(k.key) || []).map((d) =>
      h("div", { class: "device device-row", "data-device-id": d.id, "data-key": d.key, "data-state": d.state },
        h("span", { class: "name", title: d.fingerprint, text: "#" + d.id + " · " + (d.board ? d.board + " · " : "") + (d.cpu_model || d.fingerprint || d.target) }),
        h("span", { class: "badge s-" + d.state, text: d.state }),
        d.emulated ? h("span", { class: "badge s-queued", title: "runs under emulation: its timings are kept apart from real boards'", text: "emulated" }) : null,
        h("div", { class: "meta" },
          h("span", {}, h("b", { text: fmtNum(d.measures_per_minute) }), " measures/min"),
          h("span", {}, h("b", { text: d.in_flight }), " in flight"),
          h("span", {}, h("b", { text: fmtNum(d.completed) }), " done"),
          d.cores ? h("span", {}, h("b", { text: d.cores }), " cores") : null,
          d.memory_bytes ? h("span", {}, h("b", { text: (d.memory_bytes / 1073741824).toFixed(1) }), " GiB") : null,
          d.arch ? h("span", { class: "mono", text: d.arch }) : null,
          h("span", { class: "mono", text: d.target }),
          errorChips(d.errors)),
        d.quarantine_reason ? h("div", { class: "meta err", text: d.quarantine_reason }) : null));
    return h("div", { class: "key", "data-key": k.key }, head, rows);
  }));
}

// --- rendering: jobs -------------------------------------------------------------------------

// How much the job measures: "200 per task" (the fixed split), or its budget and / or time limit
// spread by the task scheduler, with the cap per task and the early stop when given.
function budgetText(j) {
  if (!j.budget && !j.time_limit_s) return fmtNum(j.trials_per_task) + " per task";
  const parts = [];
  if (j.budget) parts.push(fmtNum(j.budget) + " trials");
  if (j.time_limit_s) parts.push(fmtDuration(j.time_limit_s));
  if (j.trials_per_task) parts.push("at most " + fmtNum(j.trials_per_task) + " per task");
  if (j.early_stop !== null) parts.push(j.early_stop ? "early stop " + j.early_stop : "no early stop");
  return parts.join(", ");
}

// Seconds of a running job's time limit that have passed.
function limitElapsed(j) {
  return j.time_limit_s && j.started_ms ? ((j.finished_ms || Date.now()) - j.started_ms) / 1000 : 0;
}

// The bar is the API's `progress`: measurements of the budget (tasks x trials in the fixed
// split) or time of the time limit, whichever is further.
function progressBar(job) {
  const pct = Math.round(job.progress * 1000) / 10;
  const bar = h("div", { class: "bar " + job.state }, h("span", {}));
  bar.firstChild.style.width = pct + "%";
  let label = job.trials_total
    ? fmtNum(job.trials_done) + " / " + fmtNum(job.trials_total)
    : job.state === "queued" ? "waiting" : fmtNum(job.trials_done) + " trials";
  if (job.time_limit_s && job.state === "running")
    label += " · " + fmtDuration(limitElapsed(job)) + " of " + fmtDuration(job.time_limit_s);
  return h("div", { class: "progress", title: pct + "% of " + budgetText(job) }, bar, h("span", { class: "label", text: label }));
}

function renderJobs(jobs) {
  show($("jobs-empty"), jobs.length === 0);
  $("jobs-count").textContent = jobs.length ? jobs.length + (jobs.length === 1 ? " job" : " jobs") : "";
  replace($("jobs-body"), jobs.map((j) => {
    const eta = j.state === "running" ? fmtDuration(j.eta_s)
      : j.state === "done" && j.finished_ms && j.started_ms ? "took " + fmtDuration((j.finished_ms - j.started_ms) / 1000) : "–";
    return h("tr", {
      class: "job-row" + (j.id === state.selected ? " selected" : ""),
      "data-job-id": j.id, "data-state": j.state, "data-trials": j.trials_done,
      "data-progress": j.progress.toFixed(4),
      onclick: () => { location.hash = "job=" + j.id; },
    },
      h("td", {}, h("span", { class: "job-id", text: "#" + j.id })),
      h("td", {}, j.model || "(unnamed)", h("span", { class: "sub", text: j.tasks_total ? j.tasks_done + " of " + j.tasks_total + " tasks done" : "" })),
      h("td", { text: j.owner || "–" }),
      h("td", {}, h("span", { class: "mono", text: j.target }), h("span", { class: "sub", text: "key " + j.device_key })),
      h("td", {}, h("span", { class: "badge s-" + j.state, title: j.error || j.state, text: j.state })),
      h("td", {}, progressBar(j)),
      h("td", { class: "num", title: "the model's estimated latency: every task's best kernel time times the times the model runs it, predicted from similar tasks while a task is unmeasured", text: fmtLatency(j.best_latency_ms) + partialTasks(j) }),
      h("td", { class: "num", text: eta }));
  }));
}

// --- rendering: one job ----------------------------------------------------------------------

function curve(task) {
  const W = 340, H = 150, L = 38, R = 12, T = 12, B = 24;
  const pts = task.curve;
  const svg = s("svg", {
    class: "curve", viewBox: `0 0 ${W} ${H}`, "data-points": pts.length, "data-task": task.key,
    role: "img", "aria-label": "best GFLOP/s after each trial",
  });
  const id = "curve-fill";
  svg.append(s("defs", {}, s("linearGradient", { id, x1: 0, y1: 0, x2: 0, y2: 1 },
    s("stop", { offset: "0%", "stop-color": "#f76707", "stop-opacity": ".28" }),
    s("stop", { offset: "100%", "stop-color": "#f76707", "stop-opacity": "0" }))));
  const xMax = Math.max(task.trials_budget, task.trials, 1);
  const yTop = Math.max(...pts.map((p) => p[1]), 0);
  const step = yTop > 0 ? niceStep(yTop / 4) : 0.25;
  const yMax = Math.max(step, Math.ceil((yTop * 1.04) / step) * step);
  const x = (t) => L + (W - L - R) * (t / xMax);
  const y = (g) => T + (H - T - B) * (1 - g / yMax);
  for (let g = 0; g <= yMax + step / 2 && (pts.length || g === 0); g += step) {
    svg.append(s("line", { class: "grid", x1: L, x2: W - R, y1: y(g), y2: y(g) }));
    svg.append(s("text", { class: "axis", x: L - 6, y: y(g) + 3, "text-anchor": "end", text: fmtNum(g, 3) }));
  }
  for (const t of [0, Math.round(xMax / 2), xMax])
    svg.append(s("text", { class: "axis", x: x(t), y: H - 8, "text-anchor": t === 0 ? "start" : t === xMax ? "end" : "middle", text: t }));
  svg.append(s("text", { class: "axis", x: W - R, y: T - 2, "text-anchor": "end", text: "GFLOP/s" }));
  if (!pts.length) {
    svg.append(s("text", { class: "nodata", x: (L + W - R) / 2, y: H / 2, "text-anchor": "middle", text: "no trials yet" }));
    return svg;
  }
  // A step line: the best so far holds until the next improvement.
  let d = "", prev = null;
  for (const [t, g] of pts) {
    d += prev === null ? `M${x(0)},${y(g)} L${x(t)},${y(g)}` : ` L${x(t)},${y(prev)} L${x(t)},${y(g)}`;
    prev = g;
  }
  const lastX = x(pts[pts.length - 1][0]);
  svg.append(s("path", { class: "area", d: d + ` L${lastX},${y(0)} L${x(0)},${y(0)} Z` }));
  svg.append(s("path", { class: "line", d }));
  pts.forEach(([t, g], i) => {
    const last = i === pts.length - 1;
    svg.append(s("circle", { class: last ? "pt last" : "pt", cx: x(t), cy: y(g), r: last ? 3.5 : 2.5 },
      s("title", { text: `trial ${t}: ${fmtNum(g)} GFLOP/s` })));
  });
  return svg;
}

// The smallest of 1, 2, 2.5, 5 times a power of ten that is at least v: a readable tick step.
function niceStep(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v - 1e-12) return m * p;
  return 10 * p;
}

function histogram(task) {
  const ok = task.trials - task.trials_failed;
  const rows = [["measured", ok, true], ...Object.entries(task.errors).map(([k, n]) => [k.replace(/_/g, " "), n, false])];
  const max = Math.max(1, ...rows.map((r) => r[1]));
  return h("div", { class: "hist", "data-errors": task.trials_failed },
    rows.map(([name, n, good]) => {
      const bar = h("div", { class: "hb" });
      bar.style.width = (n ? Math.max(2, (100 * n) / max) : 0) + "%";
      return h("div", { class: "hist-row" + (good ? " ok" : ""), "data-kind": good ? "none" : name },
        h("span", { text: name }), h("div", {}, bar), h("span", { class: "n", text: n }));
    }));
}

function configsTable(task, openKeys) {
  const det = h("details", { class: "configs", "data-key": task.key },
    h("summary", { text: `Configs measured (${task.configs_total}${task.configs_total > task.configs.length ? ", newest " + task.configs.length : ""})` }),
    h("table", {},
      h("thead", {}, h("tr", {}, h("th", { text: "#" }), h("th", { text: "Config" }), h("th", { class: "num", text: "GFLOP/s" }), h("th", { class: "num", text: "Time" }))),
      h("tbody", {}, task.configs.map((c) => h("tr", { class: "config-row" },
        h("td", { class: "num", text: c.trial }),
        h("td", { class: "cfg", title: c.config, text: c.config }),
        c.error === "none" ? h("td", { class: "num", text: fmtNum(c.gflops) }) : h("td", { class: "num err", title: c.error_msg, text: c.error.replace(/_/g, " ") }),
        h("td", { class: "num", text: fmtUs(c.latency_us) }))))));
  if (openKeys.has(task.key)) det.open = true;
  return det;
}

function renderJob(detail) {
  const j = detail.job;
  const sec = $("job-detail");
  show(sec, true);
  sec.dataset.jobId = j.id;
  $("job-title").textContent = "Job #" + j.id + (j.model ? " · " + j.model : "");
  $("job-sub").textContent = [j.owner && "by " + j.owner, j.target, "key " + j.device_key].filter(Boolean).join(" · ");
  const stats = [
    ["State", h("span", { class: "badge s-" + j.state, text: j.state })],
    ["Phase", j.state === "running" && j.phase ? j.phase : "–", "wide"],
    ["Progress", Math.round(j.progress * 100) + "%"],
    ["Trials", fmtNum(j.trials_done) + (j.trials_total ? " / " + fmtNum(j.trials_total) : "")],
    ["Budget", budgetText(j), "wide"],
    ["Failed", fmtNum(j.trials_failed)],
    ["Best latency", fmtLatency(j.best_latency_ms) + partialTasks(j)],
    ["Pace", j.trials_per_minute === null ? "–" : fmtNum(j.trials_per_minute) + " /min"],
    [j.state === "running" ? "ETA" : "Elapsed", j.state === "running" ? fmtDuration(j.eta_s)
      : j.started_ms ? fmtDuration(((j.finished_ms || Date.now()) - j.started_ms) / 1000) : "–"],
  ];
  replace($("job-stats"), stats.map(([k, v, wide]) => h("div", { class: "stat" + (wide ? " wide" : "") }, h("div", { class: "k", text: k }), h("div", { class: "v" }, v))));
  if (j.error) $("job-stats").append(h("div", { class: "stat err" }, h("div", { class: "k", text: "Error" }), h("div", { text: j.error })));
  else if (j.driver_failures > 0) $("job-stats").append(h("div", { class: "stat err" }, h("div", { class: "k", text: "Driver tries failed: " + j.driver_failures }), h("div", { text: j.driver_failure })));
  const openKeys = new Set([...document.querySelectorAll("details.configs[open]")].map((d) => d.dataset.key));
  const tasks = j.tasks.map((t, i) => h("div", { class: "task " + t.status, "data-task": t.key, "data-trials": t.trials },
    h("div", { class: "task-head" },
      h("span", { class: "task-name", text: (i + 1) + ". " + t.template }),
      h("span", { class: "badge s-" + t.status, text: t.status })),
    h("div", { class: "task-key", title: t.key, text: t.key }),
    h("div", { class: "task-best" },
      h("span", {}, h("b", { text: t.best ? fmtNum(t.best.gflops) : "–" }), " GFLOP/s"),
      h("span", {}, h("b", { text: t.best ? fmtUs(t.best.latency_us) : "–" }), " best"),
      h("span", {}, h("b", { text: t.trials }), (t.trials_budget ? " / " + t.trials_budget : "") + " trials")),
    curve(t),
    histogram(t),
    configsTable(t, openKeys)));
  replace($("tasks"), tasks.length ? tasks : [h("p", { class: "empty", text: j.state === "queued" ? "Queued: tasks appear once the model is imported." : "No tasks." })]);
}

// --- rendering: events -----------------------------------------------------------------------

function eventClass(e) {
  if (e.kind === "job_state") {
    if (/ done\b/.test(e.text)) return "job_done";
    if (/ failed\b/.test(e.text)) return "job_failed";
  }
  return e.kind;
}

function renderEvents(events) {
  show($("events-empty"), events.length === 0);
  replace($("events"), events.slice(0, 60).map((e) => {
    const kind = eventClass(e);
    return h("li", { class: "event ev-" + kind, "data-kind": e.kind },
      h("time", { text: fmtTime(e.unix_ms) }),
      h("span", {}, h("span", { class: "ev-kind", text: kind.replace(/_/g, " ") }), e.text));
  }));
}

// --- the loop --------------------------------------------------------------------------------

async function refresh() {
  try {
    const [farm, jobs, events] = await Promise.all([api("/api/v1/farm"), api("/api/v1/jobs"), api("/api/v1/events")]);
    state.jobs = jobs.jobs;
    let sel = selectedFromHash();
    if (sel === null || !jobs.jobs.some((j) => j.id === sel)) {
      const running = jobs.jobs.find((j) => j.state === "running");
      sel = running ? running.id : jobs.jobs.length ? jobs.jobs[0].id : null;
    }
    state.selected = sel;
    const detail = sel !== null ? await api("/api/v1/jobs/" + sel) : null;
    renderSummary(farm, jobs.jobs);
    renderFarm(farm);
    renderJobs(jobs.jobs);
    if (detail) renderJob(detail); else show($("job-detail"), false);
    renderEvents(events.events);
    show($("token-banner"), false);
    show($("error-banner"), false);
    state.needToken = false;
    state.lastOk = Date.now();
    state.updates += 1;
    document.body.dataset.updates = state.updates;
    document.body.dataset.loaded = "1";
  } catch (e) {
    state.needToken = e instanceof Unauthorized;
    if (e instanceof Unauthorized) {
      show($("token-banner"), true);
      $("token-note").textContent = sessionStorage.getItem(TOKEN_KEY) ? e.message : "Kept in this tab only (sessionStorage).";
    } else {
      $("error-banner").textContent = "Cannot reach kilnd: " + e.message;
      show($("error-banner"), true);
    }
  }
  updateLive();
}

function updateLive() {
  const live = $("live");
  const fresh = state.lastOk && Date.now() - state.lastOk < 3 * POLL_MS;
  live.classList.toggle("ok", !!fresh);
  live.classList.toggle("stale", !fresh && !!state.lastOk);
  $("live-text").textContent = state.needToken ? "waiting for the token" : !state.lastOk ? "connecting…" : fresh ? "live · updated " + fmtTime(state.lastOk) : "stale · last update " + ago(state.lastOk, Date.now());
}

function start() {
  $("foot-host").textContent = location.host;
  $("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const v = $("token-input").value.trim();
    if (v) sessionStorage.setItem(TOKEN_KEY, v);
    $("token-input").value = "";
    refresh();
  });
  window.addEventListener("hashchange", refresh);
  refresh();
  setInterval(refresh, POLL_MS);
}

document.addEventListener("DOMContentLoaded", start);
