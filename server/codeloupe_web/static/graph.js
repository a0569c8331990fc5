// The served graph map: fetches the map with the token (a navigation to /graph carries none), hands it to the
// engine's map code (map.js reads it from #graph-data) and points its file links at the search page's file view
// (the token in their fragment, as the search page's links have it).
"use strict";

(async () => {
  const address = new URLSearchParams(location.search);
  const repo = address.get("repo") || address.get("root");  // `root` in an address bookmarked before
  const scope = new URLSearchParams(repo ? { repo } : {});
  try {
    const map = await (await api("/v1/graph?" + scope)).json();
    scope.set("file", "");
    const data = document.createElement("script");
    data.id = "graph-data";
    data.type = "application/json";
    data.textContent = JSON.stringify({ ...map, fileView: "/?" + scope, fileViewFragment: tokenFragment });
    const code = document.createElement("script");
    code.src = "/static/map.js";
    document.body.append(data, code);
  } catch (err) {
    document.getElementById("summary").textContent = String(err.message || err);
  }
})();
