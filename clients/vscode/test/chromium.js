'use strict';
// Loads webview HTML into headless Chromium (Debian's /usr/bin/chromium) with every network request intercepted,
// an `acquireVsCodeApi` that records posted messages, and CSP violations collected.
const fs = require('node:fs');
const puppeteer = require('puppeteer-core');

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

async function launchChromium() {
    if (!fs.existsSync(CHROMIUM)) {
        throw new Error(`Chromium not found at ${CHROMIUM} (apt-get install -y chromium, or set CHROMIUM_PATH)`);
    }
    return puppeteer.launch({
        executablePath: CHROMIUM,
        headless: true,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
            '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
    });
}

/** Opens `html` in a fresh page. `requests` lists every request the page tried (all are aborted); `loaded`, the
 * messages the page posted as it loaded (its `replay`); `onPost(message)`, when given, gets each message it posts;
 * `state.value` is the webview's state, as VS Code keeps it for a panel (the page's getState() starts from it, its
 * setState() replaces it). */
async function openWebview(browser, html, onPost = () => undefined, state = { value: undefined }) {
    const page = await browser.newPage();
    await page.exposeFunction('__toExtension', onPost);
    await page.exposeFunction('__setState', (value) => {
        state.value = value;
    });
    const requests = [];
    const violations = [];
    const errors = [];
    await page.setRequestInterception(true);
    page.on('request', (request) => {
        requests.push(request.url());
        void request.abort();
    });
    page.on('pageerror', (error) => errors.push(error.message));
    page.on('console', (message) => {
        if (message.text().includes('Content Security Policy')) {
            violations.push(message.text());
        }
    });
    await page.evaluateOnNewDocument((initialState) => {
        window.__posted = [];
        window.__violations = [];
        document.addEventListener('securitypolicyviolation', (event) => window.__violations.push(`${event.violatedDirective} ${event.blockedURI}`));
        let acquired = false;
        window.acquireVsCodeApi = () => {
            if (acquired) {
                throw new Error('acquireVsCodeApi may only be called once');
            }
            acquired = true;
            const postMessage = (message) => {
                window.__posted.push(message);
                void window.__toExtension(message);
            };
            let kept = initialState;
            const setState = (value) => {
                kept = value;
                void window.__setState(value);
                return value;
            };
            return { postMessage, getState: () => kept, setState };
        };
    }, state.value);
    await page.goto('about:blank');
    requests.length = 0;
    await page.setContent(html, { waitUntil: 'load' });
    const result = {
        page,
        requests,
        errors,
        loaded: await page.evaluate(() => window.__posted.splice(0)),
        async violations() {
            return [...violations, ...(await page.evaluate(() => window.__violations))];
        },
        async links() {
            return page.$$eval('a[data-uri]', (anchors) => anchors.map((anchor) => ({
                uri: anchor.getAttribute('data-uri'),
                range: JSON.parse(anchor.getAttribute('data-range')),
                text: anchor.textContent,
            })));
        },
        async csp() {
            return page.$eval('meta[http-equiv="Content-Security-Policy"]', (meta) => meta.getAttribute('content'));
        },
        /** Clicks the element `selector` names and returns the messages the page posted. */
        async click(selector) {
            await page.click(selector);
            return page.evaluate(() => window.__posted.splice(0));
        },
        close: () => page.close(),
    };
    return result;
}

/**
 * Runs the page of a stub webview panel (test/vscode) in Chromium as VS Code runs a webview's: loaded afresh from the
 * panel's html when the panel loads it (new html, or shown again after its page was let go), gone when it is let go,
 * each message the extension posts delivered in order, each message the page posts handed to the extension, the
 * state a page set handed to the next page it loads.
 */
async function runPanelPage(browser, panel) {
    // VS Code keeps a webview's state while its panel is open, across its pages, and in a reloaded window for a tab it restores
    const state = { value: panel.restoredState };
    let view;
    let steps = Promise.resolve();
    const failures = [];
    const queue = (step) => {
        steps = steps.then(step).catch((error) => failures.push(error));
        return steps;
    };
    panel.page = {
        load: () => queue(async () => {
            await view?.close();
            view = await openWebview(browser, panel.webview.html, (message) => panel.receive(message), state);
        }),
        unload: () => queue(async () => {
            await view?.close();
            view = undefined;
        }),
        deliver: (message) => queue(() => view?.page.evaluate((posted) => window.postMessage(posted, '*'), message)),
    };
    await panel.page.load();
    return {
        /** The webview's state (`value`), as the pages set it. */
        state,
        /** The page shown now, once what was queued for it so far has reached it; undefined while there is none. */
        async current() {
            await steps;
            if (failures.length > 0) {
                throw failures[0];
            }
            return view;
        },
        async close() {
            panel.page = undefined;
            await queue(() => view?.close());
        },
    };
}

module.exports = { launchChromium, openWebview, runPanelPage };
