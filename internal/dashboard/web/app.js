// The w8y dashboard. Every value from the server goes into the page as
// text (textContent, never parsed as HTML), so that an item named like markup
// shows as what it is.
"use strict";

const PAGE = 100;          // items a refresh reads: one page of the list
const REFRESH_MS = 2000;   // how often the table is read again
const MAX_EVENTS = 200;    // events the page keeps
const CHART_MS = 10000;    // how often the chart is read again (the server reads it at most as often)
const SEARCH_WAIT_MS = 250; // typing pauses this long before a search is sent

const $ = (id) => document.getElementById(id);
const state = { offset: 0, length: 0, page: null, now: Date.now(), skew: 0, actions: false, detail: null, search: null, failing: null, refreshes: 0 };

// el makes an element with text and a class.
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

// ago is a time as "3 min ago", with the absolute time as its title.
function ago(ms) {
  if (ms === null || ms === undefined) return el("span", "never");
  const s = Math.round((Date.now() + state.skew - ms) / 1000);
  let text;
  if (s < 5) text = "just now";
  else if (s < 60) text = s + " s ago";
  else if (s < 3600) text = Math.floor(s / 60) + " min ago";
  else if (s < 86400) text = Math.floor(s / 3600) + " h ago";
  else text = Math.floor(s / 86400) + " d ago";
  const t = el("time", text);
  const d = new Date(ms);
  t.dateTime = d.toISOString();
  t.title = d.toLocaleString();
  return t;
}

// slot is an item's next slot under --schedule, Unix ms, in UTC to the
// second, as w8y --status and w8yctl show it, with the local time as its
// title.
function slot(ms) {
  const d = new Date(ms);
  const t = el("time", d.toISOString().replace(/\.\d+Z$/, "Z"));
  t.dateTime = d.toISOString();
  t.title = d.toLocaleString();
  return t;
}

// left is what is left of a key's TTL in words.
function left(ms) {
  if (ms === null || ms === undefined) return "";
  if (ms < 0) return "no expiry";
  const s = Math.ceil(ms / 1000);
  if (s < 60) return s + " s";
  if (s < 3600) return Math.floor(s / 60) + " min";
  return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
}

function showError(msg) {
  $("error").hidden = !msg;
  $("error").textContent = msg || "";
}

async function getJSON(url) {
  const res = await fetch(url, { headers: { Accept: "application/json" } });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(body.error || res.status + " " + res.statusText);
  return body;
}

function failing(st) {
  return st.consecutive_failures > 0 || st.state === "backoff" || st.state === "blocked" || st.state === "invalid";
}

// duration is a length of time in words.
function duration(ms) {
  if (ms === null || ms === undefined) return "";
  if (ms < 1000) return ms + " ms";
  const s = Math.round(ms / 1000);
  if (s < 60) return s + " s";
  if (s < 3600) return Math.floor(s / 60) + " min" + (s % 60 ? " " + (s % 60) + " s" : "");
  return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
}

// showSummary is the summary line of the whole list, which the server
// counts every few seconds for every browser at once: each count is a span
// whose data-count names it.
function showSummary(sum) {
  const p = $("summary");
  if (sum.items === 0) {
    p.textContent = "the list " + $("list").textContent + " is missing or empty";
  } else {
    const c = sum.counts;
    const part = (name, n, text) => { const s = el("span", n.toLocaleString("en") + " " + text); s.dataset.count = name; s.dataset.n = n; return s; };
    const paused = part("paused", c.paused, "paused" + (c.paused_running ? " (" + c.paused_running + " still running)" : ""));
    p.replaceChildren(part("items", sum.items, "items"), part("running", c.running, "running"),
      part("cooling", c.cooling, "cooling"), part("backoff", c.backoff, "backing off"), paused,
      part("failing", c.failing, "failing"));
    if (sum.duplicates) p.append(part("duplicates", sum.duplicates, sum.duplicates === 1 ? "a duplicate (w8yctl check)" : "duplicates (w8yctl check)"));
    if (c.blocked) p.append(part("blocked", c.blocked, "blocked"));
    if (c.invalid) p.append(part("invalid", c.invalid, "invalid"));
    p.title = "counted " + new Date(sum.at).toLocaleTimeString() + " in " + duration(sum.took_ms);
  }
  const lag = sum.lag, l = $("lag");
  l.className = "";
  if (!lag.known) l.textContent = "lag: unknown (the due index is kept only where an item's keys are colocated)";
  else if (lag.due === 0) l.textContent = "lag: none, every item due has been taken";
  else {
    l.textContent = "lag: " + lag.due + " due and not taken" + (lag.never_tried ? " (" + lag.never_tried + " never tried)" : "") +
      (lag.oldest_ms !== null ? ", the oldest waiting " + duration(lag.oldest_ms) : "");
    l.className = "behind";
  }
  l.dataset.due = lag.due;
  const places = sum.fleet_max_running, f = $("places");
  f.hidden = !places;
  if (places) {
    f.textContent = places.in_use + " of " + places.limit + " in use (--fleet-max-running)";
    f.dataset.inUse = places.in_use;
    f.dataset.limit = places.limit;
  }
  // The rate of --fleet-rate and the fleet's starts in its window, as
  // w8yctl status says them; the next start is counted from the read.
  const rate = sum.fleet_rate, rt = $("rate");
  rt.hidden = !rate;
  if (rate) {
    rt.textContent = "rate: " + rate.started + " of " + rate.limit + " in the last " + rate.rate.split("/")[1] +
      (rate.next_start_ms > 0 ? ", next start in " + duration(rate.next_start_ms) : "") + " (--fleet-rate " + rate.rate + ")";
    rt.dataset.started = rate.started;
    rt.dataset.limit = rate.limit;
  }
  // What the server breaks of w8y's promises (docs/operating.md, "The
  // Redis w8y needs"); nothing where all is well or INFO is hidden.
  const r = sum.redis, rp = $("redis");
  const says = [];
  if (r && r.may_evict) says.push("Redis may evict w8y's keys when it is full (maxmemory-policy " + r.maxmemory_policy + "): a lock evicted lets two workers run one item; set maxmemory-policy noeviction");
  if (r && r.replica) says.push("Redis is a replica, which refuses every write: point w8y at the primary");
  rp.hidden = says.length === 0;
  rp.textContent = says.join(". ");
}

async function refreshSummary() {
  try {
    showSummary(await getJSON("api/summary"));
  } catch (e) {
    showError("cannot count the list: " + e.message);
  }
}

function lastCell(st) {
  const td = el("td");
  if (!st.last_result) return td;
  const code = st.last_exit_code === null || st.last_exit_code === undefined ? "" : " (" + st.last_exit_code + ")";
  td.append(el("span", st.last_result + code, st.last_result === "success" ? "ok" : "fail"));
  if (st.last_end) { td.append(" "); td.append(ago(st.last_end)); }
  return td;
}

// removeButton asks for a second click before it removes the item.
function removeButton(item) {
  const b = el("button", "remove");
  b.type = "button";
  b.dataset.action = "remove";
  b.dataset.item = item;
  b.addEventListener("click", () => {
    if (b.dataset.armed) { act("remove", item); return; }
    b.dataset.armed = "1";
    b.textContent = "remove? click again";
    b.className = "confirm";
  });
  return b;
}

function button(label, action, item) {
  const b = el("button", label);
  b.type = "button";
  b.dataset.action = action;
  b.dataset.item = item;
  b.addEventListener("click", () => act(action, item));
  return b;
}

function row(st) {
  const tr = el("tr");
  tr.dataset.item = st.item;
  const name = el("td", null, "item");
  const a = el("a", st.item);
  a.href = "#";
  a.title = st.item;
  a.addEventListener("click", (ev) => { ev.preventDefault(); openDetail(st.item); });
  name.append(a);
  tr.append(name);
  // A paused item may still run its last run: it shows as both.
  const paused = st.pause_ms !== null && st.pause_ms !== undefined;
  const shown = st.state === "locked" && paused ? "running, paused" : st.state;
  const stateText = shown + (paused && st.pause_reason ? " (" + st.pause_reason + ")" : "");
  const stateCell = el("td", stateText, "state-" + (paused ? "paused" : st.state));
  if (st.problem) stateCell.title = st.problem;
  // Under --schedule, a cooldown lasts until the item's next slot.
  if (st.state === "cooldown" && st.next_slot !== null && st.next_slot !== undefined) stateCell.append(", next slot ", slot(st.next_slot));
  tr.append(stateCell);
  // The holder's host and process, as w8y --status shows it; the whole
  // token on hover.
  const holder = el("td", st.holder ? st.holder.replace(/:[^:]*$/, "") : "");
  if (st.holder) holder.title = st.holder;
  tr.append(holder);
  const since = el("td");
  if (st.state === "locked") since.append(ago(st.last_start));
  tr.append(since);
  tr.append(el("td", left(st.lock_ttl_ms)));
  const rest = st.pause_ms ?? st.backoff_ms ?? st.cooldown_ms;
  tr.append(el("td", left(rest)));
  tr.append(lastCell(st));
  tr.append(el("td", st.runs));
  tr.append(el("td", st.failures, st.failures > 0 ? "fail" : ""));
  tr.append(el("td", st.consecutive_failures, st.consecutive_failures > 0 ? "fail" : ""));
  const acts = el("td", null, "act");
  if (state.actions) {
    acts.append(paused ? button("resume", "resume", st.item) : button("pause", "pause", st.item));
    acts.append(button("run now", "run-now", st.item));
    if (st.state === "locked") acts.append(button("cancel", "cancel", st.item));
    acts.append(removeButton(st.item));
  }
  tr.append(acts);
  return tr;
}

// place shows rows in tbody, in order, keeping the row already shown for
// the same item, and of it every cell that shows the same (the buttons
// too, where they are the same): a refresh every 2 seconds must not take a
// button away from under a click, or undo a remove's first click.
function place(tbody, rows) {
  const old = new Map(Array.from(tbody.rows, (tr) => [tr.dataset.item, tr]));
  rows.forEach((fresh, i) => {
    let tr = old.get(fresh.dataset.item);
    if (tr) {
      old.delete(fresh.dataset.item);
      patch(tr, fresh);
    } else {
      tr = fresh;
    }
    if (tbody.rows[i] !== tr) tbody.insertBefore(tr, tbody.rows[i] || null);
  });
  for (const tr of old.values()) tr.remove();
}

// patch replaces the cells of tr that fresh shows otherwise.
function patch(tr, fresh) {
  const actions = (cell) => Array.from(cell.querySelectorAll("button"), (b) => b.dataset.action).join();
  Array.from(fresh.cells).forEach((cell, i) => {
    const cur = tr.cells[i];
    const same = cell.classList.contains("act") ? actions(cur) === actions(cell) : cur.isEqualNode(cell);
    if (!same) cur.replaceWith(cell);
  });
}

// render draws the page of items as the filter and order ask.
function render() {
  const searching = state.search !== null;
  const p = searching ? state.search : state.page;
  if (!p) return;
  let items = p.items;
  if ($("failing-first").checked) {
    // The whole list's failing items on top (the first 100 the server
    // finds), then the rest of what is shown.
    const top = searching ? [] : state.failing || [];
    const onTop = new Set(top.map((st) => st.item));
    items = top.concat(items.filter((st) => !onTop.has(st.item)));
    items = items.slice().sort((a, b) => (failing(b) - failing(a)) || (b.consecutive_failures - a.consecutive_failures));
  }
  place($("items").tBodies[0], items.map(row));
  $("prev").hidden = $("next").hidden = searching;
  if (searching) {
    $("range").textContent = p.matches + (p.matches === 1 ? " item holds " : " items hold ") + JSON.stringify(p.query) +
      (p.matches > p.items.length ? ", the first " + p.items.length + " shown" : "");
    return;
  }
  const to = Math.min(p.offset + p.items.length, p.length);
  $("range").textContent = p.length ? (p.offset + 1) + "–" + to + " of " + p.length : "";
  $("prev").disabled = p.offset === 0;
  $("next").disabled = to >= p.length;
}

// refresh reads the page shown again, or the search typed, over the
// whole list.
async function refresh() {
  const query = $("filter").value.trim();
  try {
    if (query) {
      const r = await getJSON("api/search?limit=" + PAGE + "&q=" + encodeURIComponent(query));
      if ($("filter").value.trim() !== query) return;
      state.skew = r.now - Date.now();
      state.search = r;
    } else {
      const p = await getJSON("api/items?offset=" + state.offset + "&limit=" + PAGE);
      if ($("filter").value.trim() !== "") return;
      state.skew = p.now - Date.now();
      state.page = p;
      state.search = null;
    }
    state.failing = $("failing-first").checked ? (await getJSON("api/search?state=failing&limit=" + PAGE)).items : null;
    showError("");
    render();
    state.refreshes++;
  } catch (e) {
    showError("cannot read the list: " + e.message);
    return;
  }
  try {
    await refreshWorkers();
  } catch (e) {
    showError("cannot read the workers: " + e.message);
  }
}

// workerRow is one live worker's row: what it is, and what it runs now.
function workerRow(w) {
  const tr = el("tr");
  tr.dataset.holder = w.holder;
  const running = el("td");
  for (const r of w.running) running.append(el("code", r.item, "run"), " ");
  if (!w.running.length) running.textContent = "–";
  tr.append(el("td", w.holder), el("td", w.state, "state-" + w.state), el("td"), running,
    el("td", w.mode), el("td", w.version), el("td"));
  tr.cells[2].append(ago(Date.parse(w.since)));
  tr.cells[6].append(ago(Date.parse(w.started)));
  return tr;
}

// refreshWorkers reads the live workers: their count and their table.
async function refreshWorkers() {
  const p = await getJSON("api/workers");
  const n = p.workers.length;
  const busy = p.workers.filter((w) => w.state === "busy").length;
  $("workers-count").textContent = n + (n === 1 ? " worker live" : " workers live") + " · " + busy + " busy · " + (n - busy) + " idle";
  $("workers").tBodies[0].replaceChildren(...p.workers.map(workerRow));
}

let searchTimer = null;
// searchSoon sends the search once typing pauses.
function searchSoon() {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(refresh, SEARCH_WAIT_MS);
}

function eventLine(e) {
  const li = el("li");
  li.dataset.id = e.id;
  li.append(ago(e.time));
  const f = e.fields || {};
  li.append(el("b", f.type || "event"));
  li.append(" ");
  li.append(el("span", f.item || "", "ev-item"));
  for (const [k, v] of Object.entries(f)) {
    if (k === "type" || k === "item") continue;
    li.append(" " + k + "=" + v);
  }
  return li;
}

function addEvent(list, e) {
  list.prepend(eventLine(e));
  while (list.children.length > MAX_EVENTS) list.lastChild.remove();
}

// follow shows the latest events, then each new one as the server sends
// it (server-sent events: the browser reconnects by itself, from the last
// ID it saw).
async function follow() {
  let newest = "";
  try {
    const r = await getJSON("api/events?n=50");
    for (const e of r.events) addEvent($("events"), e);
    newest = r.newest;
  } catch (e) {
    showError("cannot read the events: " + e.message);
  }
  const src = new EventSource("api/events/stream" + (newest ? "?after=" + encodeURIComponent(newest) : ""));
  src.onopen = () => { $("stream-state").textContent = "live"; };
  src.onerror = () => { $("stream-state").textContent = "reconnecting…"; };
  src.onmessage = (m) => {
    const e = JSON.parse(m.data);
    addEvent($("events"), e);
    if (state.detail !== null && e.fields && e.fields.item === state.detail) {
      addEvent($("detail-events"), e);
      // A run's end rewrites the state hash: show the new one.
      if (e.fields.type === "finish") {
        getJSON("api/item?item=" + encodeURIComponent(state.detail))
          .then((s) => { if (s.item === state.detail) showState(s.state); })
          .catch(() => {});
      }
      if (e.fields.type === "start" || e.fields.result) {
        showRuns(state.detail).catch(() => {});
      }
    }
  };
}

// showState lists what the item's state hash keeps: times as times, the
// kept output as preformatted text.
function showState(fields) {
  const dl = $("detail-state");
  dl.replaceChildren();
  for (const name of Object.keys(fields).sort()) {
    const value = fields[name];
    const dd = el("dd");
    if (name === "last_start" || name === "last_end") dd.append(ago(Number(value)));
    else if (name === "next_slot") dd.append(slot(Number(value)));
    else if (name === "last_stdout" || name === "last_stderr") dd.append(el("pre", value));
    else dd.textContent = value;
    dd.dataset.field = name;
    dl.append(el("dt", name), dd);
  }
  if (Object.keys(fields).length === 0) dl.append(el("dt", "never ran"), el("dd"));
}

// runRow is one of an item's recent runs.
function runRow(run) {
  const tr = el("tr");
  tr.dataset.holder = run.holder;
  const time = (ms) => { const td = el("td"); if (ms !== null) td.append(ago(ms)); return td; };
  tr.append(time(run.start), time(run.end));
  const result = run.result === null ? "running" : run.result + (run.exit_code !== null ? " (" + run.exit_code + ")" : "");
  tr.append(el("td", result, run.result === null ? "state-locked" : run.result === "success" ? "ok" : "fail"));
  tr.append(el("td", duration(run.duration_ms)));
  const holder = el("td", run.holder.replace(/:[^:]*$/, ""));
  holder.title = run.holder;
  tr.append(holder);
  return tr;
}

async function showRuns(item) {
  const r = await getJSON("api/runs?n=20&item=" + encodeURIComponent(item));
  if (state.detail !== item) return;
  const body = $("detail-runs").tBodies[0];
  body.replaceChildren(...r.runs.map(runRow));
  if (r.runs.length === 0) {
    const tr = el("tr");
    tr.append(el("td", "no runs of this item in the events stream"));
    body.append(tr);
  }
}

async function openDetail(item) {
  state.detail = item;
  $("detail").hidden = false;
  $("detail-name").textContent = item;
  $("detail-state").replaceChildren();
  $("detail-runs").tBodies[0].replaceChildren();
  $("detail-events").replaceChildren();
  try {
    const s = await getJSON("api/item?item=" + encodeURIComponent(item));
    if (state.detail !== item) return;
    showState(s.state);
    await showRuns(item);
    if (state.detail !== item) return;
    const r = await getJSON("api/events?n=20&item=" + encodeURIComponent(item));
    if (state.detail !== item) return;
    for (const e of r.events) addEvent($("detail-events"), e);
    if (r.events.length === 0) $("detail-events").append(el("li", "no events of this item in the stream"));
  } catch (e) {
    showError("cannot read the item: " + e.message);
  }
}

function say(text, bad) {
  $("message").textContent = text;
  $("message").className = bad ? "bad" : "";
}

// act posts an action with the token; the server refuses it (401) without
// the right one, and changes nothing.
async function act(action, item) {
  const body = { item };
  if (action === "pause") {
    body.reason = $("pause-reason").value;
    body.for = $("pause-for").value.trim();
  }
  if (action === "cancel") body.reason = $("cancel-reason").value;
  sessionStorage.setItem("w8y-token", $("token").value);
  try {
    const res = await fetch("api/" + action, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: "Bearer " + $("token").value },
      body: JSON.stringify(body),
    });
    const r = await res.json().catch(() => ({}));
    if (!res.ok) {
      say(action + " " + item + " refused: " + res.status + " " + (r.error || res.statusText), true);
      return;
    }
    // Every action replies {action, results: [{item, changed, holder}]}.
    const res0 = (r.results || [])[0] || {};
    let note = "done";
    if (action === "add" && res0.changed === 0) note = "the list holds it already";
    else if (action === "remove" && res0.changed === 0) note = "the list did not hold it";
    else if (action !== "cancel" && res0.holder) note = "done; the run under way goes on";
    say(action + " " + item + ": " + note, false);
  } catch (e) {
    say(action + " " + item + " failed: " + e.message, true);
  }
  refresh();
  refreshSummary();
}

async function start() {
  try {
    const c = await getJSON("api/config");
    $("list").textContent = c.list;
    document.title = "w8y " + c.list;
    state.actions = c.actions;
    $("actions").hidden = !c.actions;
  } catch (e) {
    showError("cannot reach the server: " + e.message);
  }
  $("token").value = sessionStorage.getItem("w8y-token") || "";
  $("filter").addEventListener("input", searchSoon);
  $("add").addEventListener("click", () => {
    const item = $("add-item").value;
    if (item === "") { say("type the item to add", true); return; }
    act("add", item);
  });
  $("failing-first").addEventListener("change", refresh);
  $("prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - PAGE); refresh(); });
  $("next").addEventListener("click", () => { state.offset += PAGE; refresh(); });
  $("detail-close").addEventListener("click", () => { state.detail = null; $("detail").hidden = true; });
  await Promise.all([refresh(), refreshSummary()]);
  setInterval(refresh, REFRESH_MS);
  setInterval(refreshSummary, REFRESH_MS);
  refreshChart();
  setInterval(refreshChart, CHART_MS);
  follow();
}


// The chart of the list's runs and failures over the last hours: a bar
// per bucket, runs behind, failures in front, drawn as SVG elements (never
// markup).
const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

function drawChart(c) {
  const W = 720, H = 120, top = 14, bottom = 16, n = c.runs.length;
  const most = Math.max(1, ...c.runs);
  const bar = W / n;
  const g = svg("svg", { viewBox: "0 0 " + W + " " + H, preserveAspectRatio: "xMinYMid meet", role: "img", "aria-label": "runs and failures per " + duration(c.bucket_ms) });
  g.append(svg("line", { x1: 0, x2: W, y1: H - bottom, y2: H - bottom }));
  const y = (v) => H - bottom - (H - top - bottom) * v / most;
  for (let i = 0; i < n; i++) {
    const at = new Date(c.from + i * c.bucket_ms).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    const runs = svg("rect", { class: "runs", x: i * bar + 1, width: bar - 2, y: y(c.runs[i]), height: H - bottom - y(c.runs[i]) });
    runs.dataset.runs = c.runs[i];
    runs.append(svg("title", {}, at + ": " + c.runs[i] + " runs, " + c.failures[i] + " failed"));
    const failed = svg("rect", { class: "failures", x: i * bar + 1, width: bar - 2, y: y(c.failures[i]), height: H - bottom - y(c.failures[i]) });
    failed.dataset.failures = c.failures[i];
    g.append(runs, failed);
    if (i % 6 === 0) g.append(svg("text", { class: "axis", x: i * bar, y: H - 3 }, at));
  }
  const total = c.runs.reduce((a, b) => a + b, 0);
  g.append(svg("text", { class: "axis", x: 0, y: 10 }, total === 0 ? "no runs" : "up to " + most + " runs per bar"));
  $("chart").replaceChildren(g);
  const hours = Math.round(n * c.bucket_ms / 3600000);
  $("chart-span").textContent = "the last " + hours + " h, per " + duration(c.bucket_ms) +
    (c.since > c.from ? " (counted since " + new Date(c.since).toLocaleTimeString() + ": the window holds more events than are read)" : "");
}

async function refreshChart() {
  try {
    drawChart(await getJSON("api/chart"));
  } catch (e) {
    showError("cannot read the chart: " + e.message);
  }
}

start();
