// The search page and its file view: plain DOM, no framework, nothing loaded from elsewhere (api.js, loaded
// first, calls the server; visible.js escapes). Every text from the server is inserted as text (never as HTML)
// and shown through visible(): a control or bidi character in code or a name is shown as its escape (`\u202e`),
// as the CLI shows it, never raw; a name through oneLine(), its line break a `\n`. Code is tokenised here only
// to colour it.
"use strict";

const $ = (id) => document.getElementById(id);
const KEYWORDS = new Set(("abstract and as async await break case catch class const continue def defer del do elif else " +
  "end enum except export extends false False final finally fn for from func function go if impl import in " +
  "interface is let loop match mod module nil None not null or package pass private protected pub public raise " +
  "require return self static struct super switch this throw true True try type use var void while with yield")
  .split(" "));
const TOKEN = /(\/\/.*|#.*|\/\*[\s\S]*?\*\/|"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`(?:\\.|[^`\\])*`|\b\d[\d_.]*\b|\b[A-Za-z_]\w*\b)/g;

// An element; its text (`textContent`, string children) shown through visible().
function el(tag, props, ...children) {
  const node = document.createElement(tag);
  Object.assign(node, props || {});
  if (props && "textContent" in props) node.textContent = visible(props.textContent);
  for (const child of children) node.append(typeof child === "string" ? visible(child) : child);
  return node;
}

// The languages whose comments start with "#", by file name (the file view has no language from the server).
const HASH_COMMENTS = /\.(py|pyi|rb|sh|bash|zsh|pl|pm|r|toml|ya?ml|ex|exs|nix|tf)$/i;

function highlightLine(line, hashComments) {
  const out = [];
  let last = 0;
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

// The lines of `text` as the server numbers them (docs/protocol.md), as editors and the LSP do: a line ends at
// "\n", "\r\n" or a lone "\r" and nowhere else; a final break ends the last line.
function splitLines(text) {
  return text.replace(/(\r\n|\r|\n)$/, "").split(/\r\n|\r|\n/);
}

// Lines `firstLine`.. of `path`, numbered; those in `cited` ([first, last]) marked. Each line is escaped (in
// `el`) after the split, so an escape never adds or removes a line.
function codeBlock(text, firstLine, path, cited) {
  const code = el("code");
  const hashComments = HASH_COMMENTS.test(path);
  splitLines(text).forEach((line, i) => {
    const number = firstLine + i;
    const marked = cited && number >= cited[0] && number <= cited[1];
    code.append(el("span", { className: marked ? "line cited" : "line" },
      el("span", { className: "ln", textContent: String(number) }), ...highlightLine(line, hashComments)));
  });
  return el("pre", {}, code);
}

// The file view's address for `path`, its lines `start`-`end` cited.
function fileUrl(path, start, end) {
  const p = params({ file: path, line: start });
  if (end > start) p.set("end", end);
  return "/?" + p + tokenFragment;
}

function fileLink(path, start, end, text) {
  return el("a", { className: "loc", href: fileUrl(path, start, end), textContent: text });
}

function showBundle(bundle) {
  const core = $("core-body"), related = $("related-body");
  core.replaceChildren();
  related.replaceChildren();
  for (const hit of bundle.core) {
    const file = el("div", { className: "file" },
      el("h3", {}, el("a", { href: fileUrl(hit.path, hit.chunks.length ? hit.chunks[0].start_line : 1),
        textContent: `${hit.rank}. ${oneLine(hit.path)}` }), el("span", { className: "why", textContent: hit.why })));
    for (const chunk of hit.chunks) {
      file.append(el("div", {}, fileLink(hit.path, chunk.start_line, chunk.end_line,
        `${oneLine(hit.path)}:${chunk.start_line}-${chunk.end_line}  ${oneLine(chunk.breadcrumb)}`)),
      codeBlock(chunk.text, chunk.start_line, hit.path));
    }
    core.append(file);
  }
  for (const hit of bundle.related) {
    related.append(el("li", { value: hit.rank },
      fileLink(hit.path, hit.best_start_line, hit.best_end_line, `${oneLine(hit.path)}:${hit.best_start_line}-${hit.best_end_line}`),
      el("span", { className: "sym", textContent: hit.symbols.slice(0, 4).join(", ") }),
      el("span", { className: "why", textContent: hit.why }),
      hit.via === "graph" ? el("span", { className: "via", textContent: "via graph" }) : ""));
  }
  $("core").hidden = bundle.core.length === 0;
  $("related").hidden = bundle.related.length === 0;
  // As the engine's LaneStatus.label() names a lane: off by the user's choice, not ready, or seeing part of the corpus.
  const lanes = bundle.lanes.map((l) => l.name + (!l.ready ? (l.off ? " (off)" : " (not ready)")
    : l.coverage < 1 ? ` ${Math.round(l.coverage * 100)}%` : "")).join(", ");
  const files = bundle.core.length + bundle.related.length;
  $("meta").textContent = `${files} candidate file${files === 1 ? "" : "s"} · lanes: ${lanes}` +
    `${bundle.issue_mode ? " · issue mode" : ""} · ${(bundle.timing_ms.total || 0).toFixed(1)} ms`;
  if (!bundle.core.length) $("meta").textContent += " · no match";
}

function showError(err) {
  $("meta").replaceChildren(el("span", { className: "error", textContent: String(err.message || err) }));
}

// How long the query part of the address may grow (the server reads a request line and its headers up to 16 KiB).
const MAX_ADDRESS_QUERY = 8000;

function params(extra) {
  const p = new URLSearchParams(extra);
  if ($("root").value) p.set("repo", $("root").value);
  return p;
}

// What a new request starts from: the last answer's results, walkthrough, file and status taken away, so nothing
// a refused or failed request leaves on the page can be read as its answer.
function clearResults() {
  for (const id of ["core-body", "related-body", "answer-body", "file-body"]) $(id).replaceChildren();
  for (const id of ["answer", "core", "related", "file"]) $(id).hidden = true;
  $("meta").textContent = "";
}

async function search(event) {
  if (event) event.preventDefault();
  const q = $("q").value.trim();
  if (!q) return;
  // In the address (to bookmark or reload it) only while the server can read it back: a request line of more than
  // 16 KiB is cut off as "Bad Request" before the page loads, and a pasted page of 330 KB went there too.
  const address = params({ q }).toString();
  history.replaceState(null, "", "?" + (address.length <= MAX_ADDRESS_QUERY ? address : params({})) + location.hash);
  clearResults();
  try {
    // Sent as JSON, not in the address: a pasted page of a few hundred KB is then refused for its length in
    // words (a 422), where a request line that long was cut off with "400 Bad Request".
    showBundle(await (await api("/v1/search", {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ query: q, repo: $("root").value || null }),
    })).json());
  } catch (err) {
    showError(err);
  }
}

async function ask() {
  const question = $("q").value.trim();
  if (!question) return;
  clearResults();
  const body = $("answer-body");
  $("answer").hidden = false;
  try {
    const response = await api("/v1/ask/stream", {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ question, repo: $("root").value || null }),
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
  // The answer's plain text (`plain`): its markdown (`text`) is escaped for a renderer, so shown as text a model's
  // `\*` read `\\*`. Its code comes with its `citation` event.
  else if (event.type === "delta" && event.kind !== "code") body.append(visible(event.plain));
  else if (event.type === "citation") {
    body.append(el("div", {}, fileLink(event.path, event.start_line, event.end_line,
      `${oneLine(event.path)}:${event.start_line}-${event.end_line}`)), codeBlock(event.text, event.start_line, event.path));
  } else if (event.type === "fallback") body.append(el("div", { className: "why", textContent: `no walkthrough: ${event.reason}` }));
  else if (event.type === "done") {
    showBundle(event.bundle);
    $("meta").textContent += " · answer done";
  }
}

async function loadRoots() {
  try {
    const status = await (await api("/v1/status")).json();
    // Each by its folder's name, or its whole root where roots share that name (`serve ~/work/app ~/forks/app`
    // listed two `app`s, and a search went to whichever one the user guessed).
    const names = status.workspaces.map((ws) => ws.root.split("/").pop() || ws.root);
    status.workspaces.forEach((ws, i) => $("root").append(el("option", { value: ws.root,
      textContent: oneLine(names.indexOf(names[i]) === names.lastIndexOf(names[i]) ? names[i] : ws.root) })));
    $("root").hidden = status.workspaces.length < 2;
  } catch (err) {
    showError(err);
  }
}

// The file view: a whole indexed file read from disk by the server, numbered, the cited lines marked and
// scrolled to.
async function showFile(path, line, end) {
  for (const id of ["answer", "core", "related"]) $(id).hidden = true;
  $("file").hidden = false;
  $("file-path").textContent = oneLine(path);
  try {
    const file = await (await api("/v1/expand?" + params({ path }))).json();
    const cited = line > 0 ? [line, Math.max(line, end || line)] : null;
    $("file-body").replaceChildren(codeBlock(file.text, file.start_line, file.path, cited));
    $("meta").textContent = `${oneLine(file.path)} · ${file.end_line} lines` + (cited ? ` · cited ${cited[0]}-${cited[1]}` : "");
    const first = $("file-body").querySelector(".cited");
    if (first) first.scrollIntoView({ block: "center" });
  } catch (err) {
    showError(err);
  }
}

function showGraphLink() {
  $("graph").href = "/graph" + ($("root").hidden ? "" : "?" + params({})) + tokenFragment;  // one workspace: the default
}

$("search").addEventListener("submit", search);
$("ask").addEventListener("click", ask);
$("root").addEventListener("change", showGraphLink);
loadRoots().then(() => {
  const url = new URLSearchParams(location.search);
  // `repo`, as the API names it; `root` in an address bookmarked before.
  const repo = url.get("repo") || url.get("root");
  if (repo) $("root").value = repo;
  showGraphLink();
  const q = url.get("q"), file = url.get("file");
  if (file) showFile(file, Number(url.get("line")), Number(url.get("end")));
  else if (q) { $("q").value = q; search(); }
});
