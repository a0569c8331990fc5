// The server's API as the served pages call it: the access token (from the URL fragment, `#token=...`, kept for
// the tab's later pages in sessionStorage) goes with every call as a bearer header, since a page's own
// navigations cannot carry one.
"use strict";

const token = new URLSearchParams(location.hash.slice(1)).get("token") || sessionStorage.getItem("codeloupe-token");
if (token) sessionStorage.setItem("codeloupe-token", token);
const authHeaders = token ? { Authorization: "Bearer " + token } : {};
// What the pages' own links end with: the token in their fragment, where the server's printed address already
// has it, for a link opened in a new tab (which starts with no sessionStorage). A fragment never leaves the
// browser: not in a request, nor in a Referer.
const tokenFragment = token ? "#" + new URLSearchParams({ token }) : "";

async function api(path, options) {
  const response = await fetch(path, { ...options, headers: { ...authHeaders, ...(options && options.headers) } });
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    throw new Error(refusal(body) || response.statusText || `HTTP ${response.status}`);
  }
  return response;
}

// A refused request in words: the server's own `error`, or each problem a 422 (FastAPI's validation shape) lists.
function refusal(body) {
  if (typeof body.error === "string") return body.error;
  return Array.isArray(body.detail) ? body.detail.map(problem).join("; ") : "";
}

// The words a page's user knows for the parameters it sends.
const PARAMETER_NAMES = { q: "query", question: "question", query: "query" };

function problem({ type, loc, msg, ctx }) {
  const parameter = Array.isArray(loc) ? loc[loc.length - 1] : "";
  const name = PARAMETER_NAMES[parameter] || parameter;
  if (type === "string_too_long" && ctx) {
    return `the ${name} is longer than ${Number(ctx.max_length).toLocaleString("en-US")} characters`;
  }
  // The engine's refusals name their parameter already ("`q` must not be blank ..."); pydantic's do not.
  return type === "value_error" || !name ? String(msg) : `${name}: ${msg}`;
}
