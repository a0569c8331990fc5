'use strict';
// The engine's graph page (engine/codeloupe/graph/assets/map.*, as the real renderer fills it) in headless
// Chromium, on a map as crowded as a real workspace's: labels must stay readable.
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const path = require('node:path');
const { launchChromium, openWebview } = require('./chromium');
const { REPO_ROOT, serverPython } = require('./helpers');

/** 24 communities with long "file · symbol" names, 3 one-file communities, and edges between many of them. */
const CROWDED_MAP = `
import sys
from codeloupe.graph import render_html
from codeloupe.graph.model import Community, GraphMap, MapEdge, MapNode

communities, nodes, edges = [], [], []
for k in range(27):
    size = 1 if k >= 24 else 2 + (k * 7) % 13
    members = [f"src/package_{k}/deeply/nested/module_{k}_{m}.py" for m in range(size)]
    name = f"src/package_{k}/deeply/nested/module_{k}_0.py · VeryLongClassNameNumber{k}" if k % 3 else f"package_{k}"
    communities.append(Community(k, name, members))
    nodes += [MapNode(p, "python", k, 3, 1, 2, False) for p in members]
for k in range(24):
    for step in (1, 5, 11):
        other = (k + step) % 24
        edges.append(MapEdge(communities[k].members[0], communities[other].members[-1], "import", 1.0))
sys.stdout.write(render_html(GraphMap(nodes, edges, communities, [], [])))
`;

function crowdedPage() {
    return execFileSync(serverPython(), ['-c', CROWDED_MAP], {
        encoding: 'utf8',
        env: { ...process.env, PYTHONPATH: [path.join(REPO_ROOT, 'engine'), process.env.PYTHONPATH].filter(Boolean).join(path.delimiter) },
    });
}

/** Every label's screen box, its bubble's screen circle, every edge's screen segment, and the svg's box. */
function measure() {
    const svg = document.getElementById('map');
    const matrix = svg.getScreenCTM();
    const toScreen = (x, y) => new DOMPoint(x, y).matrixTransform(matrix);
    const box = (element) => {
        const rect = element.getBoundingClientRect();
        return { left: rect.left, top: rect.top, right: rect.right, bottom: rect.bottom, text: element.textContent };
    };
    const labels = [...document.querySelectorAll('g.community')].flatMap((group) => {
        const circle = group.querySelector('circle.bubble');
        const centre = toScreen(Number(circle.getAttribute('cx')), Number(circle.getAttribute('cy')));
        const radius = Number(circle.getAttribute('r')) * matrix.a;
        return [...group.querySelectorAll('text')].map((text) => ({ ...box(text), cx: centre.x, cy: centre.y, radius }));
    });
    const edges = [...document.querySelectorAll('line.link')].map((line) => {
        const from = toScreen(Number(line.getAttribute('x1')), Number(line.getAttribute('y1')));
        const to = toScreen(Number(line.getAttribute('x2')), Number(line.getAttribute('y2')));
        return { x1: from.x, y1: from.y, x2: to.x, y2: to.y };
    });
    // Where a bubble paints an opaque ground above the edges, the edges under it are hidden.
    const edgesFirst = (group) => [...document.querySelectorAll('line.link')].every((line) =>
        line.compareDocumentPosition(group) & Node.DOCUMENT_POSITION_FOLLOWING);
    const covers = [...document.querySelectorAll('g.community')].filter((group) => {
        const ground = group.querySelector('circle.ground');
        return ground && getComputedStyle(ground).fillOpacity === '1' && getComputedStyle(ground).fill !== 'none' && edgesFirst(group);
    }).map((group) => {
        const circle = group.querySelector('circle.ground');
        const centre = toScreen(Number(circle.getAttribute('cx')), Number(circle.getAttribute('cy')));
        return { cx: centre.x, cy: centre.y, radius: Number(circle.getAttribute('r')) * matrix.a };
    });
    return { labels, edges, covers, view: box(svg), groups: document.querySelectorAll('g.community').length,
        unconnected: [...document.querySelectorAll('#unconnected li')].map((item) => item.textContent) };
}

const intersects = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;

/** The part of the segment inside the rectangle as [low, high] fractions of its length, or undefined
 * (Liang–Barsky clipping). */
function clipToBox({ x1, y1, x2, y2 }, box) {
    let low = 0;
    let high = 1;
    const dx = x2 - x1;
    const dy = y2 - y1;
    for (const [p, q] of [[-dx, x1 - box.left], [dx, box.right - x1], [-dy, y1 - box.top], [dy, box.bottom - y1]]) {
        if (p === 0) {
            if (q < 0) {
                return undefined;
            }
        } else if (p < 0) {
            low = Math.max(low, q / p);
        } else {
            high = Math.min(high, q / p);
        }
    }
    return low < high ? [low, high] : undefined;
}

/** Does a visible part of the edge cross the label? Parts under an opaque bubble drawn above the edges are hidden. */
function edgeShowsOver(edge, label, covers) {
    const part = clipToBox(edge, label);
    if (part === undefined) {
        return false;
    }
    const samples = [0, 0.25, 0.5, 0.75, 1].map((t) => part[0] + t * (part[1] - part[0]));
    return samples.some((t) => {
        const x = edge.x1 + t * (edge.x2 - edge.x1);
        const y = edge.y1 + t * (edge.y2 - edge.y1);
        return !covers.some((cover) => Math.hypot(x - cover.cx, y - cover.cy) < cover.radius);
    });
}

describe('the graph page', function () {
    let browser;

    before(async function () {
        browser = await launchChromium();
    });

    after(async function () {
        await browser?.close();
    });

    // 380 px: an editor group beside the code, as VS Code opens the graph.
    for (const [width, height] of [[1000, 700], [700, 900], [380, 900]]) {
        it(`keeps every label inside its bubble, apart from the others and off the edges (${width}x${height})`, async function () {
            const view = await openWebview(browser, crowdedPage());
            try {
                await view.page.setViewport({ width, height });
                const { labels, edges, covers, view: svg, groups, unconnected } = await view.page.evaluate(measure);
                assert.equal(groups, 24, 'one bubble per community of two files or more');
                const canvas = await view.page.$eval('#canvas', (element) => element.getBoundingClientRect().width);
                assert.ok(canvas >= Math.min(width - 40, 600), `the map keeps room in a ${width} px panel (${canvas} px)`);
                assert.ok(labels.length >= groups, `every bubble has a label (${labels.length})`);
                for (const label of labels) {
                    assert.ok(label.left >= svg.left && label.right <= svg.right && label.top >= svg.top && label.bottom <= svg.bottom,
                        `"${label.text}" is not clipped by the view`);
                    for (const [x, y] of [[label.left, label.top], [label.right, label.top], [label.left, label.bottom], [label.right, label.bottom]]) {
                        assert.ok(Math.hypot(x - label.cx, y - label.cy) <= label.radius + 1, `"${label.text}" stays inside its bubble`);
                    }
                    for (const edge of edges) {
                        assert.ok(!edgeShowsOver(edge, label, covers), `an edge crosses "${label.text}"`);
                    }
                }
                for (let i = 0; i < labels.length; i += 1) {
                    for (let j = i + 1; j < labels.length; j += 1) {
                        assert.ok(!intersects(labels[i], labels[j]), `"${labels[i].text}" and "${labels[j].text}" overlap: ${JSON.stringify([labels[i], labels[j]])}`);
                    }
                }
                assert.equal(unconnected.length, 3, 'one-file communities are one list of unconnected files');
                assert.deepEqual(view.errors, []);
                assert.deepEqual(view.requests, []);
            } finally {
                await view.close();
            }
        });
    }
});
