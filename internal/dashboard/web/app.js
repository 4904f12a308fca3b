// The w8y dashboard. Every value from the server goes into the page as
// text (textContent, never parsed as HTML), so that an item named like markup
// shows as what it is.
"use strict";

const PAGE = 100;          // items a refresh reads: one page of the list
const REFRESH_MS = 2000;   // how often the table is read again
const MAX_EVENTS = 200;    // events the page keeps

const $ = (id) => document.getElementById(id);
const state = { offset: 0, length: 0, page: null, now: Date.now(), skew: 0, actions: false, detail: null };

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

// summarize is the summary line: the list's length and, of the page shown,
// how many items are in each state.
function summarize(p) {
  if (p.length === 0) return "the list " + $("list").textContent + " is missing or empty";
  const count = (f) => p.items.filter(f).length;
  const parts = [
    p.length + " items",
    "this page: " + count((s) => s.state === "locked") + " running",
    count((s) => s.state === "cooldown") + " cooling",
    count((s) => s.state === "backoff") + " backing off",
    count((s) => s.state === "paused") + " paused",
    count(failing) + " failing",
  ];
  return parts.join(" · ");
}

function lastCell(st) {
  const td = el("td");
  if (!st.last_result) return td;
  const code = st.last_exit_code === null || st.last_exit_code === undefined ? "" : " (" + st.last_exit_code + ")";
  td.append(el("span", st.last_result + code, st.last_result === "success" ? "ok" : "fail"));
  if (st.last_end) { td.append(" "); td.append(ago(st.last_end)); }
  return td;
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
  const stateText = st.state + (st.pause_reason ? " (" + st.pause_reason + ")" : "");
  const stateCell = el("td", stateText, "state-" + st.state);
  if (st.problem) stateCell.title = st.problem;
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
    acts.append(st.state === "paused" ? button("resume", "resume", st.item) : button("pause", "pause", st.item));
    acts.append(button("run now", "run-now", st.item));
    if (st.state === "locked") acts.append(button("cancel", "cancel", st.item));
  }
  tr.append(acts);
  return tr;
}

// render draws the page of items as the filter and order ask.
function render() {
  const p = state.page;
  if (!p) return;
  $("summary").textContent = summarize(p);
  const needle = $("filter").value.trim().toLowerCase();
  let items = p.items.filter((st) => !needle ||
    [st.item, st.state, st.holder || "", st.pause_reason || ""].some((v) => v.toLowerCase().includes(needle)));
  if ($("failing-first").checked) {
    items = items.slice().sort((a, b) => (failing(b) - failing(a)) || (b.consecutive_failures - a.consecutive_failures));
  }
  $("items").tBodies[0].replaceChildren(...items.map(row));
  const to = Math.min(p.offset + p.items.length, p.length);
  $("range").textContent = p.length ? (p.offset + 1) + "–" + to + " of " + p.length : "";
  $("prev").disabled = p.offset === 0;
  $("next").disabled = to >= p.length;
}

async function refresh() {
  try {
    const p = await getJSON("api/items?offset=" + state.offset + "&limit=" + PAGE);
    state.skew = p.now - Date.now();
    state.page = p;
    showError("");
    render();
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
    else if (name === "last_stdout" || name === "last_stderr") dd.append(el("pre", value));
    else dd.textContent = value;
    dd.dataset.field = name;
    dl.append(el("dt", name), dd);
  }
  if (Object.keys(fields).length === 0) dl.append(el("dt", "never ran"), el("dd"));
}

async function openDetail(item) {
  state.detail = item;
  $("detail").hidden = false;
  $("detail-name").textContent = item;
  $("detail-state").replaceChildren();
  $("detail-events").replaceChildren();
  try {
    const s = await getJSON("api/item?item=" + encodeURIComponent(item));
    if (state.detail !== item) return;
    showState(s.state);
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
  if (action === "cancel") body.reason = "cancelled from the dashboard";
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
    say(action + " " + item + ": done", false);
  } catch (e) {
    say(action + " " + item + " failed: " + e.message, true);
  }
  refresh();
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
  $("filter").addEventListener("input", render);
  $("failing-first").addEventListener("change", render);
  $("prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - PAGE); refresh(); });
  $("next").addEventListener("click", () => { state.offset += PAGE; refresh(); });
  $("detail-close").addEventListener("click", () => { state.detail = null; $("detail").hidden = true; });
  await refresh();
  setInterval(refresh, REFRESH_MS);
  follow();
}

start();
