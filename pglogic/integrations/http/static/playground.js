// pglogic playground: plain JavaScript, no build step. Talks to the JSON API under /v1.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { key: sessionStorage.getItem("pglogic-key") || "", checkTimer: null, seq: 0 };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c);
  return node;
}

async function api(method, path, body) {
  const headers = { "Accept": "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (state.key) headers["Authorization"] = "Bearer " + state.key;
  const res = await fetch("/v1" + path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try { data = await res.json(); } catch (e) { data = null; }
  if (res.status === 401) {
    askKey();
  }
  return { status: res.status, ok: res.ok, data };
}

function askKey() {
  const dialog = $("key-dialog");
  if (dialog.open) return;
  dialog.showModal();
  dialog.addEventListener("close", () => {
    state.key = $("api-key").value.trim();
    sessionStorage.setItem("pglogic-key", state.key);
    init();
  }, { once: true });
}

function fmt(x, digits = 3) {
  return (x === null || x === undefined || Number.isNaN(x)) ? "–" : Number(x).toFixed(digits);
}

function options() {
  return {
    operators: $("operators").value,
    mode: $("mode").value,
    k: Math.max(1, Math.min(100, parseInt($("k").value, 10) || 10)),
  };
}

// ---- the query box: live parse errors with a caret under the column -------------------------

function showError(err) {
  const box = $("query-error");
  if (!err) {
    box.hidden = true;
    $("query").removeAttribute("aria-invalid");
    return;
  }
  box.hidden = false;
  $("query-ok").hidden = true;
  $("query").setAttribute("aria-invalid", "true");
  $("error-message").textContent = err.message;
  const hasColumn = typeof err.column === "number";
  $("error-query").textContent = hasColumn ? (err.query || "").replace(/\n/g, " ") : "";
  $("error-caret").textContent = hasColumn ? " ".repeat(Math.max(0, err.column - 1)) + "^" : "";
  box.dataset.column = hasColumn ? String(err.column) : "";
  $("error-text").hidden = !hasColumn;
}

async function check() {
  const q = $("query").value;
  if (!q.trim()) { showError(null); $("query-ok").hidden = true; return; }
  const seq = ++state.seq;
  const res = await api("POST", "/compile", { query: q, ...options() });
  if (seq !== state.seq) return; // a newer keystroke won
  if (res.ok) {
    showError(null);
    const ok = $("query-ok");
    ok.hidden = false;
    ok.textContent = res.data.logical ? "✓ " + res.data.query : "plain text: dense search";
    ok.className = "query-ok";
  } else if (res.data && res.data.error) {
    showError(res.data.error);
  }
}

function scheduleCheck() {
  clearTimeout(state.checkTimer);
  state.checkTimer = setTimeout(check, 120);
}

// ---- results ------------------------------------------------------------------------------

function norm(s) { return String(s).toLowerCase().replace(/[^a-z0-9]+/g, ""); }

function labelsOf(meta) {
  const out = [];
  for (const key of ["labels", "topics", "tags", "categories", "category", "label", "topic"]) {
    const v = meta && meta[key];
    if (Array.isArray(v)) out.push(...v.map(String));
    else if (typeof v === "string") out.push(v);
  }
  return out;
}

function markedLabels(terms) {
  const typed = $("mark").value.split(",").map((s) => s.trim()).filter(Boolean);
  const source = typed.length ? typed : terms.filter((t) => t.role === "negated").map((t) => t.text);
  return new Set(source.map(norm));
}

function bar(kind, label, value, text, title) {
  const fill = el("span", { class: "fill" });
  fill.style.width = (Math.max(0, Math.min(1, value)) * 100).toFixed(1) + "%";
  return el("div", { class: "bar " + kind, title: title || "" },
    el("span", { class: "bar-label", text: label }),
    el("span", { class: "track" }, fill),
    el("span", { class: "bar-value", text }));
}

function hitItem(hit, terms, marks, withBars) {
  const labels = labelsOf(hit.metadata);
  const excluded = labels.some((l) => marks.has(norm(l)));
  const li = el("li", { class: "hit" + (excluded ? " excluded" : ""), "data-id": hit.id,
                        "data-excluded": excluded ? "true" : "false" });
  const head = el("div", { class: "hit-head" },
    el("span", { class: "rank", text: String(hit.rank) }),
    el("span", { class: "title", text: hit.title || hit.id }),
    el("span", { class: "score", title: "score", text: fmt(hit.score, 4) }));
  li.append(head);
  const chips = el("div", { class: "chips" }, el("span", { class: "doc-id", text: "#" + hit.id }));
  const shown = [...labels.filter((l) => marks.has(norm(l))), ...labels.filter((l) => !marks.has(norm(l)))];
  for (const l of shown.slice(0, 8)) {
    chips.append(el("span", { class: "chip" + (marks.has(norm(l)) ? " chip-excluded" : ""), text: l }));
  }
  if (excluded) chips.append(el("span", { class: "badge", text: "excluded topic" }));
  li.append(chips);
  if (withBars && hit.explain) {
    const bars = el("div", { class: "bars" });
    for (const t of terms) {
      const truth = hit.explain.truths[t.text];
      const sim = hit.similarities[t.text];
      if (truth === undefined) continue;
      const kind = t.role === "negated" ? "negated" : (t.role === "positive" ? "positive" : "phrase");
      bars.append(bar(kind, (t.role === "negated" ? "¬ " : "") + t.text, truth, fmt(sim),
        `${t.text}: cosine similarity ${fmt(sim)}, truth ${fmt(truth)} (${t.role})`));
      const p = hit.explain.passages && hit.explain.passages[t.text];
      if (p && p.ord > 0) { // the later passage that decided this similarity (not the start)
        bars.append(el("div", { class: "passage", "data-term": t.text, "data-ord": String(p.ord),
                                title: `${t.text}: passage ${p.ord} [${p.start}:${p.end}], similarity ${fmt(p.similarity)}\n${p.snippet}` },
          el("span", { class: "passage-ord", text: "¶" + p.ord }), " " + p.snippet));
      }
    }
    for (const n of hit.explain.nots || []) {
      const lost = Math.max(0, -n.contribution);
      const rel = n.without > 0 ? lost / n.without : 0;
      bars.append(bar("not", n.expr, rel, "−" + fmt(lost),
        `${n.expr}: score ${fmt(n.without)} without it, ${fmt(hit.score)} with it (×${fmt(n.truth)})`));
    }
    li.append(bars);
  }
  return li;
}

function renderHits(list, hits, terms, marks, withBars) {
  const ol = $(list);
  ol.replaceChildren(...hits.map((h) => hitItem(h, terms, marks, withBars)));
  return hits.filter((h) => labelsOf(h.metadata).some((l) => marks.has(norm(l)))).length;
}

function renderSql(sql, took, timings) {
  $("sql-panel").hidden = false;
  $("sql-settings").textContent = Object.entries(sql.settings)
    .map(([k, v]) => `SET LOCAL ${k} = '${v}';`).join("\n");
  $("sql-text").textContent = sql.text + ";";
  $("sql-params").textContent = "-- parameters: " + JSON.stringify(sql.parameters, null, 1);
  const parts = Object.entries(timings).map(([k, v]) => `${k} ${fmt(v, 1)} ms`).join(", ");
  $("sql-summary").textContent = `· ${fmt(took, 1)} ms in the server (${parts})`;
}

function setUrl() {
  const p = new URLSearchParams();
  p.set("q", $("query").value);
  p.set("corpus", $("corpus").value);
  const o = options();
  p.set("operators", o.operators);
  p.set("mode", o.mode);
  p.set("k", String(o.k));
  if ($("mark").value.trim()) p.set("mark", $("mark").value.trim());
  history.replaceState(null, "", "?" + p.toString());
}

// The logical column: the query searched, its hits with a bar per term, and a meta line.
function showLogical(d, extra) {
  const marks = markedLabels(d.terms);
  $("results").hidden = false;
  $("logical-query").textContent = d.query;
  const n = renderHits("logical-hits", d.hits, d.terms, marks, true);
  $("logical-meta").textContent =
    `${d.hits.length} hits · ${fmt(d.took_ms, 1)} ms · ${extra}` + (marks.size ? ` · ${n} marked` : "");
  return marks;
}

async function runSearch(event) {
  if (event) event.preventDefault();
  const q = $("query").value;
  if (!q.trim()) return;
  const corpus = $("corpus").value;
  if (!corpus) { status("No corpus on this server: create one with 'pglogic corpus create'."); return; }
  setUrl();
  status("Searching…");
  document.body.classList.add("busy");
  const res = await api("POST", "/search", {
    corpus, query: q, ...options(), explain: true, dense: true, include_sql: true,
  });
  document.body.classList.remove("busy");
  if (!res.ok) {
    const err = (res.data && res.data.error) || { message: "HTTP " + res.status };
    if (err.type === "query_syntax") showError(err);
    status(err.message, true);
    return;
  }
  const d = res.data;
  showError(null);
  status("");
  $("ask-info").hidden = true;
  const marks = showLogical(d, `${d.operators}, ${d.mode}`);
  if (d.dense) {
    $("dense-column").hidden = false;
    $("dense-query").textContent = d.dense.query;
    const nd = renderHits("dense-hits", d.dense.hits, [], marks, false);
    $("dense-meta").textContent = `${d.dense.hits.length} hits · ${fmt(d.dense.took_ms, 1)} ms` +
      (marks.size ? ` · ${nd} marked` : "");
  }
  if (d.sql) renderSql(d.sql, d.took_ms, d.timings_ms);
  document.body.dataset.searched = String((Number(document.body.dataset.searched) || 0) + 1);
}

// A question in plain words: the LLM writes the logical query (POST /v1/ask). What the checks
// changed is shown beside the query the model wrote, so a changed meaning is never silent.
async function runAsk() {
  const q = $("query").value;
  if (!q.trim()) return;
  const corpus = $("corpus").value;
  if (!corpus) { status("No corpus on this server: create one with 'pglogic corpus create'."); return; }
  status("Asking the LLM…");
  document.body.classList.add("busy");
  const res = await api("POST", "/ask", { corpus, question: q, ...options(), explain: true });
  document.body.classList.remove("busy");
  if (!res.ok) {
    const err = (res.data && res.data.error) || { message: "HTTP " + res.status };
    status(err.message, true);
    return;
  }
  const d = res.data;
  showError(null);
  status("");
  const lines = [d.fallback ? `Fallback (dense search): ${d.reason}` : `The LLM wrote: ${d.query}`];
  if (!d.fallback && d.repairs && d.repairs.length) {
    lines[0] = `The model wrote: ${d.model_query}`;
    lines.push(`Checked against the question: ${d.repairs.join("; ")}`);
    lines.push(`Searched: ${d.query}`);
  }
  $("ask-info").replaceChildren(...lines.map((t) => el("div", { text: t })));
  $("ask-info").hidden = false;
  showLogical(d, `LLM ${fmt(d.rewrite_ms, 0)} ms`);
  $("dense-column").hidden = true;
  document.body.dataset.searched = String((Number(document.body.dataset.searched) || 0) + 1);
}

function status(text, isError) {
  const s = $("status");
  s.textContent = text;
  s.className = "status" + (isError ? " error" : "");
}

function showFormula() {
  const f = state.families && state.families.find((x) => x.name === $("operators").value);
  const keep = (x) => x.replace(/ /g, "\u00a0"); // wrap between the operators, not inside one
  $("family-formula").textContent = f ? `AND = ${keep(f.and)} · OR = ${keep(f.or)} · NOT = ${keep(f.not)}` : "";
}

// ---- start ---------------------------------------------------------------------------------

async function init() {
  const params = new URLSearchParams(location.search);
  const [health, ops, corpora] = await Promise.all([
    api("GET", "/health"), api("GET", "/operators"), api("GET", "/corpora"),
  ]);
  const h = $("health");
  $("ask").hidden = !(health.ok && health.data && health.data.llm);
  h.textContent = health.ok ? "● connected" : "● no database";
  h.className = "health " + (health.ok ? "up" : "down");
  if (!ops.ok || !corpora.ok) {
    status((corpora.data && corpora.data.error && corpora.data.error.message) || "The API is unavailable", true);
    document.body.dataset.ready = "error";
    return;
  }
  state.families = ops.data.families;
  $("operators").replaceChildren(...ops.data.families.map((f) =>
    el("option", { value: f.name, text: f.name + (f.name === ops.data.default ? " (default)" : "") })));
  $("mode").replaceChildren(...Object.entries(ops.data.modes).map(([name, what]) =>
    el("option", { value: name, title: what, text: name })));
  $("corpus").replaceChildren(...corpora.data.corpora.map((c) =>
    el("option", { value: c.name, text: `${c.name} (${c.documents.toLocaleString()} docs)` })));
  $("operators").value = params.get("operators") || ops.data.default;
  if (params.get("mode")) $("mode").value = params.get("mode");
  if (params.get("corpus")) $("corpus").value = params.get("corpus");
  if (params.get("k")) $("k").value = params.get("k");
  if (params.get("mark")) $("mark").value = params.get("mark");
  showFormula();
  const q = params.get("q");
  if (q) {
    $("query").value = q;
    await runSearch();
  } else if (!$("query").value) {
    $("query").value = '"grain" AND NOT "wheat"';
    check();
  }
  document.body.dataset.ready = "true";
}

document.addEventListener("DOMContentLoaded", () => {
  $("search-form").addEventListener("submit", runSearch);
  $("ask").addEventListener("click", runAsk);
  $("query").addEventListener("input", scheduleCheck);
  for (const id of ["operators", "mode", "corpus"]) {
    $(id).addEventListener("change", () => {
      showFormula();
      if ($("query").value.trim() && !$("results").hidden) runSearch();
    });
  }
  $("share").addEventListener("click", async () => {
    setUrl();
    try {
      await navigator.clipboard.writeText(location.href);
      $("share").textContent = "Link copied";
    } catch (e) {
      $("share").textContent = "Link is in the address bar";
    }
    setTimeout(() => { $("share").textContent = "Copy link to this search"; }, 2000);
  });
  init();
});
