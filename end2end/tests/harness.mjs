// Start a real `deck serve --demo` on a free loopback port with its own database, and a
// headless Debian Chromium (playwright-core, no browser download).
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { before, after } from "node:test";
import { chromium } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));
export const root = join(here, "..", "..");
export const shots = join(here, "..", "screenshots");
mkdirSync(shots, { recursive: true });

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
    srv.on("error", reject);
  });
}

async function waitFor(url, child, ms = 120_000) {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (child.exitCode !== null) throw new Error(`deck exited early with ${child.exitCode}`);
    try {
      const res = await fetch(url);
      if (res.ok) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`deck did not answer ${url} in time`);
}

export async function startDeck(extraArgs = []) {
  const dir = mkdtempSync(join(tmpdir(), "deck-e2e-"));
  const port = await freePort();
  const bin = process.env.DECK_BIN || join(root, "target", "debug", "deck");
  const args = ["serve", "--demo", "--listen", `127.0.0.1:${port}`, "--database", `sqlite://${join(dir, "deck.db")}`, ...extraArgs];
  const child = spawn(bin, args, { cwd: dir, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, RUST_LOG: process.env.RUST_LOG || "warn" } });
  let log = "";
  child.stdout.on("data", (d) => (log += d));
  child.stderr.on("data", (d) => (log += d));
  const base = `http://127.0.0.1:${port}`;
  try {
    await waitFor(`${base}/healthz`, child);
  } catch (e) {
    child.kill("SIGKILL");
    throw new Error(`${e.message}\n--- deck output ---\n${log}`);
  }
  return {
    base,
    log: () => log,
    async stop() {
      child.kill("SIGTERM");
      await new Promise((r) => (child.exitCode !== null ? r() : child.once("exit", r)));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function startBrowser(options = {}) {
  const userDir = mkdtempSync(join(tmpdir(), "deck-chromium-"));
  const context = await chromium.launchPersistentContext(userDir, {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    viewport: { width: 1280, height: 800 },
    ...options,
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(userDir, { recursive: true, force: true });
    },
  };
}

/** Reload `url` until `selector` shows up (the demo workload needs a moment). */
export async function reloadUntil(page, url, selector, seconds = 90) {
  for (let i = 0; i < seconds; i++) {
    await page.goto(url);
    if ((await page.locator(selector).count()) > 0) return;
    await page.waitForTimeout(1000);
  }
  throw new Error(`${selector} never appeared on ${url}`);
}

export async function shot(page, name) {
  await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
}

/**
 * Record every Content-Security-Policy violation `page` reports, across navigations: the
 * `securitypolicyviolation` events of each document and Chromium's console messages about
 * refused content. Returns the live list.
 */
export async function watchCsp(page) {
  const seen = [];
  await page.exposeBinding("__deckCspViolation", (_source, v) => seen.push(v));
  await page.addInitScript(() => {
    window.addEventListener(
      "securitypolicyviolation",
      (e) => window.__deckCspViolation({ directive: e.effectiveDirective, blocked: e.blockedURI, url: document.location.href }),
      true,
    );
  });
  page.on("console", (m) => {
    if (/Content Security Policy|Refused to/i.test(m.text())) seen.push({ console: m.text(), url: page.url() });
  });
  return seen;
}

/**
 * The hooks of a suite that drives one page of the console: before it, a `deck serve --demo`,
 * a browser and a page (20 s default timeout; with `csp`, the page's policy violations
 * collected in `violations`), handed to `ready` once all are up; after it, all stopped. The
 * session's fields are set as each part starts, so a failed start still stops what did
 * start. Handing them over is the hook's own last step because node:test does not wait for
 * one root `before` hook before starting the next. `go` and `waitForRows` take a path on
 * the console.
 */
export function consoleSuite({ csp = false } = {}, ready = () => {}) {
  const session = {
    go: (path) => session.page.goto(session.deck.base + path),
    waitForRows: (path, selector, seconds) => reloadUntil(session.page, session.deck.base + path, selector, seconds),
  };
  before(async () => {
    session.deck = await startDeck();
    session.browser = await startBrowser();
    session.page = await session.browser.context.newPage();
    session.page.setDefaultTimeout(20_000);
    if (csp) session.violations = await watchCsp(session.page);
    ready(session);
  });
  after(async () => {
    await session.browser?.close();
    await session.deck?.stop();
  });
  return session;
}
