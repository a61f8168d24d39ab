// Shoal dashboard: polls /dashboard/data every 2 s and follows one crawl's event stream.
"use strict";

const REFRESH_MS = 2000;
const PAGES_SHOWN = 15;
let streamed = null;   // "appid/crawlid" whose pages are shown
let source = null;     // its EventSource
let pinned = null;     // a crawl the user clicked

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v; else if (k === "style") node.style.cssText = v; else node.setAttribute(k, v);
  }
  for (const child of children) node.append(child instanceof Node ? child : String(child ?? ""));
  return node;
}

const fmt = (n) => (n ?? 0).toLocaleString("en-US");
const rate = (n) => (n ?? 0).toFixed(1);

function clock(seconds) {
  if (seconds === null || seconds === undefined) return "?";
  let s = Math.round(seconds);
  const h = Math.floor(s / 3600); s -= h * 3600;
  const m = Math.floor(s / 60); s -= m * 60;
  const pad = (x) => String(x).padStart(2, "0");
  return h ? `${h}:${pad(m)}:${pad(s)}` : `${m}:${pad(s)}`;
}

function setText(id, text) { document.getElementById(id).textContent = text; }

function renderHealth(data) {
  const badge = document.getElementById("health");
  badge.dataset.health = data.health.node_health;
  badge.textContent = data.health.node_health;
  badge.title = `kafka ${data.health.kafka_connected ? "connected" : "down"}, redis ${data.health.redis_connected ? "connected" : "down"}`;
  setText("gateway", `gateway ${data.health.my_id} · up ${clock(data.health.uptime_sec)}`);
  setText("updated", `updated ${new Date(data.server_time * 1000).toLocaleTimeString()}`);
}

function renderTotals(data) {
  const t = data.totals;
  setText("t-running", fmt(t.running));
  setText("t-rate", rate(t.pages_per_sec));
  setText("t-crawled", fmt(t.crawled));
  setText("t-queued", fmt(t.queued));
  setText("t-inflight", fmt(t.inflight));
  setText("t-failed", fmt(t.failed));
  const p = data.processes;
  setText("p-crawler", fmt(p.crawler.count));
  setText("p-monitors", `${p["kafka-monitor"].count} / ${p["redis-monitor"].count}`);
}

function progressBar(crawl) {
  return el("div", { class: "progress", title: `${crawl.done} of ${crawl.enqueued} requests settled` },
    el("div", { class: "fill", style: `width:${Math.min(crawl.percent, 100)}%` }),
    el("span", { class: "text" }, `${crawl.percent.toFixed(1)}%  ·  ${fmt(crawl.done)} / ${fmt(crawl.enqueued)}`));
}

function crawlRow(crawl) {
  const name = `${crawl.appid}/${crawl.crawlid}`;
  const eta = crawl.finished ? `done in ${clock(crawl.elapsed_sec)}` : clock(crawl.eta_sec);
  const row = el("tr", { "data-crawl": name, class: crawl.finished ? "finished" : "running" },
    el("td", { class: "crawl-name" }, name, el("span", { class: "spider" }, crawl.spiderid)),
    el("td", {}, progressBar(crawl)),
    el("td", { class: "num crawled" }, fmt(crawl.crawled)),
    el("td", { class: "num queued" }, fmt(crawl.queued)),
    el("td", { class: "num inflight" }, fmt(crawl.inflight)),
    el("td", { class: "num failed" }, fmt(crawl.failed + crawl.dead)),
    el("td", { class: "num near-duplicates" }, fmt(crawl.near_duplicates || 0)),
    el("td", { class: "num rate" }, rate(crawl.pages_per_sec)),
    el("td", { class: "eta" }, eta));
  row.addEventListener("click", () => { pinned = crawl; follow(crawl); });
  row.style.cursor = "pointer";
  return row;
}

function renderCrawls(data) {
  const body = document.querySelector("#crawls tbody");
  if (!data.crawls.length) return;
  body.replaceChildren(...data.crawls.map(crawlRow));
}

function renderChart(data) {
  const canvas = document.getElementById("chart");
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth, height = 180;
  canvas.width = width * ratio; canvas.height = height * ratio;
  const ctx = canvas.getContext("2d");
  ctx.scale(ratio, ratio);
  ctx.clearRect(0, 0, width, height);
  const points = data.chart;
  const now = data.server_time;
  // the chart spans the history the gateway has, from one minute up to chart_seconds
  const span = Math.min(data.chart_seconds, Math.max(60, points.length ? now - points[0][0] : 60));
  setText("chart-span", span >= 120 ? `last ${Math.round(span / 60)} min` : `last ${Math.round(span)} s`);
  const left = 44, bottom = height - 22, top = 8, right = width - 8;
  const peak = Math.max(1, ...points.map((p) => p[1]));
  const ceiling = niceCeiling(peak);
  const x = (t) => left + (right - left) * (1 - (now - t) / span);
  const y = (v) => bottom - (bottom - top) * (v / ceiling);
  ctx.strokeStyle = "#263442"; ctx.fillStyle = "#8aa0b3"; ctx.font = "11px system-ui"; ctx.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const v = (ceiling * i) / 4;
    ctx.beginPath(); ctx.moveTo(left, y(v)); ctx.lineTo(right, y(v)); ctx.stroke();
    ctx.fillText(v === 0 || v >= 10 ? Math.round(v) : v.toFixed(v >= 1 ? 1 : 2), 6, y(v) + 4);
  }
  const tick = [10, 15, 30, 60, 120, 300, 600].find((s) => span / s <= 10) || 600;
  for (let s = 0; s <= span; s += tick) {
    const label = s === 0 ? "now" : s % 60 ? `-${s}s` : `-${s / 60}m`;
    ctx.fillText(label, Math.min(x(now - s) - 10, right - 22), height - 6);
  }
  const shown = points.filter((p) => now - p[0] <= span);
  if (shown.length < 2) return;
  ctx.beginPath();
  ctx.moveTo(x(shown[0][0]), bottom);
  for (const [t, v] of shown) ctx.lineTo(x(t), y(v));
  ctx.lineTo(x(shown[shown.length - 1][0]), bottom);
  ctx.closePath();
  ctx.fillStyle = "rgba(63,182,200,0.18)"; ctx.fill();
  ctx.beginPath();
  shown.forEach(([t, v], i) => (i ? ctx.lineTo(x(t), y(v)) : ctx.moveTo(x(t), y(v))));
  ctx.strokeStyle = "#3fb6c8"; ctx.lineWidth = 2; ctx.stroke();
}

function niceCeiling(v) {
  const power = Math.pow(10, Math.floor(Math.log10(v)));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * power >= v) return step * power;
  return 10 * power;
}

function renderQueues(data) {
  const box = document.getElementById("queues");
  const rows = data.queues.domains;
  if (rows.length) {
    const deepest = rows[0].queued;
    box.replaceChildren(...rows.map((r) => el("div", { class: "row" },
      el("span", { class: "domain", title: `${r.spiderid}:${r.domain}` }, r.domain),
      el("span", { class: "track" }, el("div", { style: `width:${(100 * r.queued) / deepest}%` })),
      el("span", { class: "num" }, fmt(r.queued)))));
  } else {
    box.replaceChildren(el("div", { class: "muted" }, "No queued requests."));
  }
  setText("spiders", data.queues.spiders.map((s) => `${s.spiderid}: ${fmt(s.domains)} domains with work, ${fmt(s.inflight)} in flight`).join(" · "));
  const m = data.memory;
  if (m) {
    const limit = m.limit ? ` of ${fmt(Math.round(m.limit / 1048576))} MiB (${Math.round((100 * m.used) / m.limit)} %)` : " (no maxmemory)";
    const each = m.bytes_per_request === null ? "" : ` · ${fmt(Math.round(m.bytes_per_request))} B per stored request`;
    setText("memory", `Redis: ${fmt(Math.round(m.used / 1048576))} MiB${limit}${each}${m.policy === "noeviction" ? "" : ` · policy ${m.policy} may evict frontier keys`}`);
  }
}

function renderErrors(data) {
  const items = [
    ...data.dead_letters.map((d) => el("li", { title: d.error || "" },
      el("span", { class: "pill bad" }, "dead"), `${d.url} — ${d.error} (${d.attempts} attempts)`)),
    ...data.errors.map((e) => el("li", { title: JSON.stringify(e.error) },
      el("span", { class: "pill warn" }, "error"), `${(e.error && e.error.message) || "error"}${e.error && e.error.cause ? ": " + e.error.cause : ""}`)),
  ];
  const list = document.getElementById("errors");
  list.replaceChildren(...(items.length ? items : [el("li", { class: "muted" }, "Nothing failed.")]));
}

// Amber while a process cannot reach a service (it says so in its heartbeat) or has stopped beating
// (one that cannot reach Redis cannot say so); green again once every process is well.
function processPill(p) {
  const down = Object.keys(p.unreachable || {});
  if (down.length) return el("span", { class: "pill warn" }, `cannot reach ${down.join(", ")}`);
  if (p.late) return el("span", { class: "pill warn" }, `${p.late} late (Redis?)`);
  return p.count ? el("span", { class: "pill ok" }, "ok") : el("span", { class: "muted" }, "-");
}

function renderProcesses(data) {
  const body = document.querySelector("#processes tbody");
  body.replaceChildren(...Object.entries(data.processes).map(([name, p]) => el("tr", { "data-component": name },
    el("td", {}, name), el("td", { class: "num" }, fmt(p.count)), el("td", {}, processPill(p)),
    el("td", { class: "muted" }, p.hosts.join(", ") || "none alive"))));
}

function renderProxies(data) {
  const card = document.getElementById("proxies-card");
  card.hidden = !data.proxies.length;
  const body = document.querySelector("#proxies tbody");
  body.replaceChildren(...data.proxies.map((p) => {
    const domains = Object.keys(p.quarantined_domains);
    const state = p.quarantined_until ? el("span", { class: "pill bad" }, "quarantined")
      : domains.length ? el("span", { class: "pill warn" }, `${domains.length} domain(s)`) : el("span", { class: "pill ok" }, "healthy");
    return el("tr", { title: domains.join(", ") }, el("td", {}, p.proxy), el("td", { class: "muted" }, p.group),
      el("td", {}, state), el("td", { class: "num" }, fmt(p.requests)), el("td", { class: "num" }, fmt(p.bans)));
  }));
  // Each group of labels (a request asks for one): how many of its proxies are not quarantined everywhere.
  document.querySelector("#proxy-groups tbody").replaceChildren(...(data.proxy_groups || []).map((g) => {
    const pill = g.healthy === 0 ? "pill bad" : g.healthy < g.proxies || g.quarantined_domains ? "pill warn" : "pill ok";
    return el("tr", { "data-group": g.group }, el("td", {}, g.group),
      el("td", {}, el("span", { class: pill }, `${g.healthy}/${g.proxies} healthy`)),
      el("td", { class: "num" }, fmt(g.requests)), el("td", { class: "num" }, fmt(g.bans)));
  }));
}

// Issue 33: domains above level 0 of their block ladder, and the alert conditions: pending until they
// have held their rule's `for:`, then firing (as Prometheus shows them).
function renderPushback(data) {
  const pushback = data.pushback || { domains: [], conditions: [] };
  document.getElementById("pushback-card").hidden = !pushback.domains.length && !pushback.conditions.length;
  document.getElementById("conditions").replaceChildren(...pushback.conditions.map((c) =>
    el("li", { "data-alert": c.alert, "data-state": c.state || "firing" },
      el("span", { class: c.state === "pending" ? "pill warn" : "pill bad" }, c.alert),
      ` ${c.state || "firing"} ${c.spiderid || ""} ${c.detail}`)));
  document.querySelector("#ladder tbody").replaceChildren(...pushback.domains.map((d) =>
    el("tr", { "data-domain": `${d.spiderid}/${d.domain}` }, el("td", {}, d.spiderid), el("td", {}, d.domain),
      el("td", {}, el("span", { class: d.level >= 4 ? "pill bad" : "pill warn" }, `${d.level} ${d.state}`)),
      el("td", {}, d.reason || ""), el("td", { class: "num" }, fmt(d.steps)))));
}

function mib(bytes) { return (bytes / 1048576).toFixed(0); }

function renderRenderers(data) {
  const rows = data.renderers || [];
  document.getElementById("renderers-card").hidden = !rows.length;
  document.querySelector("#renderers tbody").replaceChildren(...rows.map((r) => el("tr", { "data-renderer": r.process },
    el("td", {}, r.process), el("td", { class: "num" }, r.pages_per_sec.toFixed(2)), el("td", { class: "num" }, fmt(r.pages)),
    el("td", { class: "num" }, mib(r.process_memory)),
    el("td", { class: "num" }, `${mib(r.browser_memory)} (${mib(r.browser_memory_peak)})`),
    el("td", { class: "num" }, fmt(r.browser_restarts)))));
}

function percent(v) { return v === null || v === undefined ? "–" : `${(100 * v).toFixed(0)} %`; }

function renderApps(data) {
  const rows = data.apps || [];
  document.getElementById("apps-card").hidden = !rows.length;
  document.querySelector("#apps tbody").replaceChildren(...rows.map((a) => el("tr", { "data-app": a.appid },
    el("td", {}, a.appid), el("td", { class: "num" }, fmt(a.running || 0)), el("td", { class: "num" }, fmt(a.queued || 0)),
    el("td", { class: "num" }, fmt(a.inflight || 0)), el("td", { class: "num" }, (a.pages_per_sec || 0).toFixed(2)),
    el("td", { class: "num" }, percent(a.share)), el("td", { class: "num" }, seconds(a.first_page_sec)),
    el("td", { class: "num" }, Object.entries(a.quota_use || {}).map(([q, v]) => `${q} ${percent(v)}`).join(", ") || "–"))));
}

// Revisits (issue 31): per crawl from GET /revisits, every REVISITS_MS; hidden without a sink's tables.
const REVISITS_MS = 10000;
let revisitsAt = 0;

function seconds(v) { return v === null || v === undefined ? "–" : v.toFixed(1); }

function renderRevisits(rows) {
  document.getElementById("revisits-card").hidden = !rows.length;
  document.querySelector("#revisits tbody").replaceChildren(...rows.map((r) => el("tr", { "data-crawl": `${r.appid}/${r.crawlid}` },
    el("td", {}, `${r.appid}/${r.crawlid}`), el("td", { class: "num" }, fmt(r.due_now)),
    el("td", { class: "num" }, `${seconds(r.lateness_p50_s)} / ${seconds(r.lateness_p99_s)}`),
    el("td", { class: "num" }, r.not_modified_share === null ? "–" : `${(100 * r.not_modified_share).toFixed(0)} %`),
    el("td", { class: "num" }, fmt(r.changes_per_hour)),
    el("td", {}, r.paused ? el("span", { class: "pill warn" }, "paused") : el("span", { class: "pill ok" }, `${fmt(r.tracked)} pages`)))));
}

async function refreshRevisits() {
  if (Date.now() - revisitsAt < REVISITS_MS) return;
  revisitsAt = Date.now();
  try {
    const envelope = await (await fetch("/revisits", { cache: "no-store" })).json();
    renderRevisits(envelope.status === "SUCCESS" ? envelope.data : []);
  } catch (err) {
    renderRevisits([]);
  }
}

function pagePill(page) {
  const code = page.status_code;
  const kind = page.success === false || !code ? "bad" : code >= 400 ? "warn" : "ok";
  return el("span", { class: `pill ${kind}` }, code || "fail");
}

function follow(crawl) {
  const name = `${crawl.appid}/${crawl.crawlid}`;
  if (streamed === name) return;
  if (source) source.close();
  streamed = name;
  setText("stream-name", name);
  document.getElementById("pages").replaceChildren(el("li", { class: "muted" }, "Listening…"));
  const url = `/crawls/${encodeURIComponent(crawl.appid)}/${encodeURIComponent(crawl.crawlid)}/events?spiderid=${encodeURIComponent(crawl.spiderid)}`;
  source = new EventSource(url);
  source.addEventListener("page", (event) => {
    const page = JSON.parse(event.data);
    const list = document.getElementById("pages");
    if (list.firstChild && list.firstChild.classList && list.firstChild.classList.contains("muted")) list.replaceChildren();
    list.prepend(el("li", { title: page.url }, pagePill(page), page.url));
    while (list.children.length > PAGES_SHOWN) list.lastChild.remove();
  });
  source.addEventListener("finished", () => { source.close(); source = null; streamed = null; pinned = null; });
  source.onerror = () => { if (source) source.close(); source = null; streamed = null; };
}

function pickStream(data) {
  if (source && streamed) return;
  const running = data.crawls.find((c) => !c.finished);
  if (pinned && !running) return;
  if (running) follow(running);
}

// With REST_API_KEY set every data route needs the key: asked once and handed to the gateway, which
// keeps it in an HttpOnly, SameSite=Strict cookie (EventSource cannot send headers; no script reads it).
async function askForKey() {
  const key = window.prompt("This gateway needs its API key (REST_API_KEY):");
  if (!key) return false;
  const response = await fetch("/dashboard/key", { method: "POST", headers: { "X-API-Key": key }, cache: "no-store" });
  return response.ok;
}

async function refresh() {
  try {
    const response = await fetch("/dashboard/data", { cache: "no-store" });
    if (response.status === 401 && await askForKey()) return;
    const envelope = await response.json();
    if (envelope.status !== "SUCCESS") throw new Error(envelope.error && envelope.error.message);
    const data = envelope.data;
    document.getElementById("banner").hidden = true;
    for (const render of [renderHealth, renderTotals, renderCrawls, renderChart, renderQueues, renderErrors, renderProcesses, renderProxies, renderRenderers,
      renderPushback, renderApps]) {
      render(data);
    }
    pickStream(data);
    refreshRevisits();
  } catch (err) {
    const banner = document.getElementById("banner");
    banner.hidden = false;
    banner.textContent = `The gateway does not answer (${err.message}); retrying…`;
  } finally {
    setTimeout(refresh, REFRESH_MS);
  }
}

refresh();
