(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("graph-data").textContent);
  var root = data.root || "";
  var vscode = typeof acquireVsCodeApi === "function" ? acquireVsCodeApi() : null;
  var SVG = "http://www.w3.org/2000/svg";
  var svg = document.getElementById("map");
  var W = 1000, H = 700;

  function el(name, attrs, parent) {
    var node = document.createElementNS(SVG, name);
    for (var k in attrs) { node.setAttribute(k, attrs[k]); }
    if (parent) { parent.appendChild(node); }
    return node;
  }

  var nodeByPath = {};
  data.nodes.forEach(function (n) { nodeByPath[n.path] = n; });
  var groups = data.communities.filter(function (c) { return c.size > 1; });
  var groupOf = {};
  groups.forEach(function (c, k) { c.members.forEach(function (p) { groupOf[p] = k; }); });

  // Inter-community edge counts (structural and semantic edges between files of two different bubbles).
  var between = {};
  data.edges.forEach(function (e) {
    var a = groupOf[e.source], b = groupOf[e.target];
    if (a === undefined || b === undefined || a === b) { return; }
    var key = a < b ? a + ":" + b : b + ":" + a;
    between[key] = (between[key] || 0) + 1;
  });

  // Deterministic layout: bubbles start on a spiral (largest in the middle), then a fixed number of
  // relaxation steps push overlapping bubbles apart and pull linked ones together. No randomness.
  var maxSize = groups.reduce(function (m, c) { return Math.max(m, c.size); }, 1);
  var bubbles = groups.map(function (c, k) {
    var angle = k * 2.399963, dist = 40 * Math.sqrt(k);
    return { c: c, r: 30 + 60 * Math.sqrt(c.size / maxSize), x: W / 2 + dist * Math.cos(angle),
             y: H / 2 + dist * Math.sin(angle) };
  });
  var pairs = Object.keys(between).map(function (key) {
    var ab = key.split(":");
    return { a: +ab[0], b: +ab[1], n: between[key] };
  });
  for (var step = 0; step < 300; step++) {
    pairs.forEach(function (p) {
      var A = bubbles[p.a], B = bubbles[p.b], dx = B.x - A.x, dy = B.y - A.y;
      var d = Math.sqrt(dx * dx + dy * dy) || 1, want = A.r + B.r + 40, pull = (d - want) * 0.002;
      A.x += dx / d * pull; A.y += dy / d * pull; B.x -= dx / d * pull; B.y -= dy / d * pull;
    });
    for (var i = 0; i < bubbles.length; i++) {
      for (var j = i + 1; j < bubbles.length; j++) {
        var A = bubbles[i], B = bubbles[j], dx = B.x - A.x, dy = B.y - A.y;
        var d = Math.sqrt(dx * dx + dy * dy) || 1, overlap = A.r + B.r + 12 - d;
        if (overlap > 0) {
          if (d === 1 && dx === 0 && dy === 0) { dx = 1; }
          A.x -= dx / d * overlap / 2; A.y -= dy / d * overlap / 2;
          B.x += dx / d * overlap / 2; B.y += dy / d * overlap / 2;
        }
      }
    }
    bubbles.forEach(function (b) { b.x += (W / 2 - b.x) * 0.003; b.y += (H / 2 - b.y) * 0.003; });
  }
  // The pulls above can leave bubbles overlapping; labels live inside their bubble, so finish with pushes only.
  for (var settle = 0; settle < 500 && separate(); settle++) {}

  function separate() {
    var moved = false;
    for (var i = 0; i < bubbles.length; i++) {
      for (var j = i + 1; j < bubbles.length; j++) {
        var A = bubbles[i], B = bubbles[j], dx = B.x - A.x, dy = B.y - A.y;
        if (dx === 0 && dy === 0) { dx = 1; }
        var d = Math.sqrt(dx * dx + dy * dy), overlap = A.r + B.r + 12 - d;
        if (overlap > 0.01) {
          A.x -= dx / d * overlap / 2; A.y -= dy / d * overlap / 2;
          B.x += dx / d * overlap / 2; B.y += dy / d * overlap / 2;
          moved = true;
        }
      }
    }
    return moved;
  }
  if (bubbles.length) {
    var minX = Infinity, minY = Infinity, maxX = -Infinity, maxY = -Infinity;
    bubbles.forEach(function (b) {
      minX = Math.min(minX, b.x - b.r); minY = Math.min(minY, b.y - b.r);
      maxX = Math.max(maxX, b.x + b.r); maxY = Math.max(maxY, b.y + b.r);
    });
    svg.setAttribute("viewBox", [minX - 20, minY - 20, maxX - minX + 40, maxY - minY + 40].join(" "));
    // Never drawn smaller than 1:1 (labels would shrink past reading); a small window scrolls instead.
    svg.style.minWidth = (maxX - minX + 40) + "px";
    svg.style.minHeight = (maxY - minY + 40) + "px";
  }

  var linkLayer = el("g", { "class": "links" }, svg);
  // Edges run rim to rim, under the bubbles (each has an opaque ground), so no edge crosses a label.
  pairs.forEach(function (p) {
    var A = bubbles[p.a], B = bubbles[p.b], dx = B.x - A.x, dy = B.y - A.y;
    var d = Math.sqrt(dx * dx + dy * dy) || 1, ux = dx / d, uy = dy / d;
    el("line", { "class": "link", x1: A.x + ux * A.r, y1: A.y + uy * A.r, x2: B.x - ux * B.r, y2: B.y - uy * B.r,
                 "stroke-width": (1 + Math.log(1 + p.n) * 1.5).toFixed(2), "data-count": p.n }, linkLayer);
  });

  // Every name shown (a file's path, a community's) goes through oneLine() (visible.js, loaded first): a bidi
  // control in it is shown as its escape, a line break as `\n`. Links and messages keep the name itself.

  // Where a file link leads: the served page's file view (`fileView`, a URL the path completes, then
  // `fileViewFragment` when given), a file:// URL (a page written with the workspace's root), else the path
  // relative to the page.
  // Each part of a path encoded: a file named "javascript:..." at the top must stay a relative link, never a URL
  // with a scheme of its own.
  function encodedPath(path) { return path.split("/").map(encodeURIComponent).join("/"); }

  function fileHref(path) {
    if (data.fileView) { return data.fileView + encodeURIComponent(path) + (data.fileViewFragment || ""); }
    return root ? "file://" + encodedPath(root.replace(/\/$/, "")) + "/" + encodedPath(path) : "./" + encodedPath(path);
  }

  function openFile(path, event) {
    if (vscode) {
      if (event) { event.preventDefault(); }
      vscode.postMessage({ type: "open", path: path });
    }
  }

  function fileLink(path) {
    var a = document.createElement("a");
    a.href = fileHref(path);
    a.textContent = oneLine(path);
    a.addEventListener("click", function (event) { openFile(path, event); });
    return a;
  }

  var detail = document.getElementById("detail");
  function showCommunity(b) {
    detail.textContent = "";
    var h = document.createElement("h2");
    h.textContent = oneLine(b.c.name) + " (" + b.c.size + " files)";
    detail.appendChild(h);
    var list = document.createElement("ul");
    b.c.members.forEach(function (path) {
      var li = document.createElement("li");
      li.appendChild(fileLink(path));
      var n = nodeByPath[path];
      if (n && n.god) {
        var badge = document.createElement("span");
        badge.className = "badge";
        badge.textContent = " hub";
        li.appendChild(badge);
      }
      list.appendChild(li);
    });
    detail.appendChild(list);
  }

  // A bubble's label: the name's parts ("file · symbol") and the size, one per line, each cut to the width of the
  // bubble at its height (measured, not guessed), so labels never leave their bubble or meet another.
  var LINE = 15;
  function label(b, g) {
    var lines = oneLine(b.c.name).split(" · ").concat([b.c.size + " files"]);
    lines.forEach(function (line, k) {
      var dy = (k - (lines.length - 1) / 2) * LINE;
      var half = Math.abs(dy) + LINE / 2;
      var width = half < b.r ? 2 * Math.sqrt(b.r * b.r - half * half) - 8 : 0;
      var text = el("text", { x: b.x, y: b.y + dy + 4, "class": k === lines.length - 1 ? "size" : "name" }, g);
      text.textContent = line;
      for (var n = line.length; n > 1 && text.getComputedTextLength() > width; n--) {
        text.textContent = line.slice(0, n - 1) + "\u2026";
      }
      if (text.getComputedTextLength() > width) { text.remove(); }
    });
  }

  var bubbleLayer = el("g", { "class": "bubbles" }, svg);
  bubbles.forEach(function (b) {
    var g = el("g", { "class": "community", "data-id": b.c.id, "data-size": b.c.size }, bubbleLayer);
    el("title", {}, g).textContent = oneLine(b.c.name) + " (" + b.c.size + " files)";
    el("circle", { "class": "ground", cx: b.x, cy: b.y, r: b.r }, g);
    el("circle", { "class": "bubble", cx: b.x, cy: b.y, r: b.r }, g);
    label(b, g);
    var files = null;
    g.addEventListener("click", function () {
      showCommunity(b);
      if (files) { files.remove(); files = null; g.classList.remove("open"); return; }
      g.classList.add("open");
      files = el("g", { "class": "files" }, g);
      b.c.members.forEach(function (path, k) {
        var angle = k * 2.399963, dist = (b.r - 8) * Math.sqrt((k + 0.5) / b.c.size);
        var dot = el("circle", { "class": "file" + (nodeByPath[path] && nodeByPath[path].god ? " god" : ""),
                                 cx: b.x + dist * Math.cos(angle), cy: b.y + dist * Math.sin(angle), r: 4,
                                 "data-path": path }, files);
        el("title", {}, dot).textContent = oneLine(path);
        dot.addEventListener("click", function (event) {
          event.stopPropagation();
          if (vscode) { openFile(path, event); } else { window.location.href = fileHref(path); }
        });
      });
    });
  });

  // One-file communities are files with no edge to the rest: one list, not a bubble each.
  var singles = data.communities.filter(function (c) { return c.size <= 1; });
  if (singles.length) {
    var section = document.getElementById("unconnected");
    var heading = document.createElement("h2");
    heading.textContent = "Unconnected files (" + singles.length + ")";
    section.appendChild(heading);
    var list = document.createElement("ul");
    singles.forEach(function (c) {
      c.members.forEach(function (path) {
        var li = document.createElement("li");
        li.appendChild(fileLink(path));
        list.appendChild(li);
      });
    });
    section.appendChild(list);
  }
  // A count and its noun, singular for one (as the text map says "1 file").
  function amount(count, noun, plural) {
    return count + " " + (count === 1 ? noun : plural || noun + "s");
  }
  document.getElementById("summary").textContent = amount(data.nodes.length, "file") + ", " +
    amount(groups.length, "community", "communities") +
    (singles.length ? ", " + amount(singles.length, "unconnected file") : "") + ", " +
    amount((data.godNodes || []).length, "hub");
})();
