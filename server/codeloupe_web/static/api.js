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
    // Every refusal is `{"error": words}`, a malformed request's (422) too.
    throw new Error((typeof body.error === "string" && body.error) || response.statusText || `HTTP ${response.status}`);
  }
  return response;
}
