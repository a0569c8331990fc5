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

/** Opens `html` in a fresh page. `requests` lists every request the page tried (all are aborted). */
async function openWebview(browser, html) {
    const page = await browser.newPage();
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
    await page.evaluateOnNewDocument(() => {
        window.__posted = [];
        window.__violations = [];
        document.addEventListener('securitypolicyviolation', (event) => window.__violations.push(`${event.violatedDirective} ${event.blockedURI}`));
        let acquired = false;
        window.acquireVsCodeApi = () => {
            if (acquired) {
                throw new Error('acquireVsCodeApi may only be called once');
            }
            acquired = true;
            return { postMessage: (message) => window.__posted.push(message), getState: () => undefined, setState: () => undefined };
        };
    });
    await page.goto('about:blank');
    requests.length = 0;
    await page.setContent(html, { waitUntil: 'load' });
    const result = {
        page,
        requests,
        errors,
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

module.exports = { launchChromium, openWebview };
