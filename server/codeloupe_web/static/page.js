// The search page: plain DOM, no framework, nothing loaded from elsewhere. Every text from the server is
// inserted as text (never as HTML); code is tokenised here only to colour it.
"use strict";

const token = new URLSearchParams(location.hash.slice(1)).get("token") || sessionStorage.getItem("codeloupe-token");
if (token) sessionStorage.setItem("codeloupe-token", token);
const authHeaders = token ? { Authorization: "Bearer " + token } : {};

const $ = (id) => document.getElementById(id);
const KEYWORDS = new Set(("abstract and as async await break case catch class const continue def defer del do elif else " +
  "end enum except export extends false False final finally fn for from func function go if impl import in " +
  "interface is let loop match mod module nil None not null or package pass private protected pub public raise " +
  "require return self static struct super switch this throw true True try type use var void while with yield")
  .split(" "));
const TOKEN = /(\/\/.*|#.*|\/\*[\s\S]*?\*\/|"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`(?:\\.|[^`\\])*`|\b\d[\d_.]*\b|\b[A-Za-z_]\w*\b)/g;

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  Object.assign(node, props || {});
  for (const child of children) node.append(child);
  return node;
}

function highlightLine(line, language) {
  const out = [];
  let last = 0;
  const hashComments = ["python", "ruby", "bash", "perl", "r", "toml", "yaml", "elixir"].includes(language);
  for (const match of line.matchAll(TOKEN)) {
    const text = match[0];
    let cls = "";
    if (text.startsWith("//") || text.startsWith("/*")) cls = "com";
    else if (text.startsWith("#")) cls = hashComments ? "com" : "";
    else if (/^["'`]/.test(text)) cls = "str";
    else if (/^\d/.test(text)) cls = "num";
    else if (KEYWORDS.has(text)) cls = "kw";
    if (!cls) continue;
    out.push(line.slice(last, match.index), el("span", { className: cls, textContent: text }));
    last = match.index + text.length;
  }
  out.push(line.slice(last));
  return out;
}

function codeBlock(text, firstLine, language) {
  const code = el("code");
  text.replace(/\n$/, "").split("\n").forEach((line, i) => {
    code.append(el("span", { className: "ln", textContent: String(firstLine + i) }), ...highlightLine(line, language), "\n");
  });
  return el("pre", {}, code);
}

async function api(path, options) {
  const response = await fetch(path, { ...options, headers: { ...authHeaders, ...(options && options.headers) } });
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    throw new Error(body.error || (body.detail && JSON.stringify(body.detail)) || response.statusText);
  }
  return response;
}

function showBundle(bundle) {
  const core = $("core-body"), related = $("related-body");
  core.replaceChildren();
  related.replaceChildren();
  for (const hit of bundle.core) {
    const file = el("div", { className: "file" },
      el("h3", {}, `${hit.rank}. ${hit.path}`, el("span", { className: "why", textContent: hit.why })));
    for (const chunk of hit.chunks) {
      file.append(el("div", { className: "loc", textContent: `${hit.path}:${chunk.start_line}-${chunk.end_line}  ${chunk.breadcrumb}` }),
        codeBlock(chunk.text, chunk.start_line, hit.language));
    }
    core.append(file);
  }
  for (const hit of bundle.related) {
    related.append(el("li", { value: hit.rank },
      el("span", { className: "loc", textContent: `${hit.path}:${hit.best_start_line}-${hit.best_end_line}` }),
      el("span", { className: "sym", textContent: hit.symbols.slice(0, 4).join(", ") }),
      el("span", { className: "why", textContent: hit.why }),
      hit.via === "graph" ? el("span", { className: "via", textContent: "via graph" }) : ""));
  }
  $("core").hidden = bundle.core.length === 0;
  $("related").hidden = bundle.related.length === 0;
  const lanes = bundle.lanes.map((l) => l.name + (l.ready ? "" : " (not ready)")).join(", ");
  $("meta").textContent = `${bundle.core.length + bundle.related.length} files · lanes: ${lanes}` +
    `${bundle.issue_mode ? " · issue mode" : ""} · ${(bundle.timing_ms.total || 0).toFixed(1)} ms`;
  if (!bundle.core.length) $("meta").textContent += " · no match";
}

function params(extra) {
  const p = new URLSearchParams(extra);
  if ($("root").value) p.set("root", $("root").value);
  return p;
}

async function search(event) {
  if (event) event.preventDefault();
  const q = $("q").value.trim();
  if (!q) return;
  history.replaceState(null, "", "?" + params({ q }).toString() + location.hash);
  $("answer").hidden = true;
  try {
    showBundle(await (await api("/v1/search?" + params({ q }))).json());
  } catch (err) {
    $("meta").replaceChildren(el("span", { className: "error", textContent: String(err.message || err) }));
  }
}

async function ask() {
  const question = $("q").value.trim();
  if (!question) return;
  const body = $("answer-body");
  body.replaceChildren();
  $("answer").hidden = false;
  try {
    const response = await api("/v1/ask/stream", {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ question, root: $("root").value || null }),
    });
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const message = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const data = message.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
        if (data) onAskEvent(JSON.parse(data), body);
      }
    }
  } catch (err) {
    body.append(el("span", { className: "error", textContent: String(err.message || err) }));
  }
}

function onAskEvent(event, body) {
  if (event.type === "retrieval") $("meta").textContent = `asking · ${event.core.length} core, ${event.related.length} related files`;
  else if (event.type === "delta" && event.kind !== "code") body.append(event.text);
  else if (event.type === "citation") {
    body.append(el("div", { className: "loc", textContent: `${event.path}:${event.start_line}-${event.end_line}` }),
      codeBlock(event.text, event.start_line, event.language));
  } else if (event.type === "fallback") body.append(el("div", { className: "why", textContent: `no walkthrough: ${event.reason}` }));
  else if (event.type === "done") {
    showBundle(event.bundle);
    $("meta").textContent += " · answer done";
  }
}

async function loadRoots() {
  try {
    const status = await (await api("/v1/status")).json();
    for (const ws of status.workspaces) $("root").append(el("option", { value: ws.root, textContent: ws.root.split("/").pop() || ws.root }));
    $("root").hidden = status.workspaces.length < 2;
  } catch (err) {
    $("meta").replaceChildren(el("span", { className: "error", textContent: String(err.message || err) }));
  }
}

async function openGraph(event) {
  if (!token) return; // a plain link works without a token; with one, the page must send the header itself
  event.preventDefault();
  const html = await (await api($("graph").getAttribute("href"))).text();
  window.open(URL.createObjectURL(new Blob([html], { type: "text/html" })), "_blank");
}

$("search").addEventListener("submit", search);
$("graph").addEventListener("click", openGraph);
$("ask").addEventListener("click", ask);
$("root").addEventListener("change", () => { $("graph").href = "/graph?" + params({}).toString(); });
loadRoots().then(() => {
  const q = new URLSearchParams(location.search).get("q");
  if (q) { $("q").value = q; search(); }
});
