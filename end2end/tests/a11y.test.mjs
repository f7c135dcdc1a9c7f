// Accessibility and look of the console in a real browser: axe-core finds no serious or
// critical violation on any page in either theme (the system's light and dark setting, and
// an explicit theme chosen with the switch); unknown paths get the console's own 404 page;
// every page has its own title; a skip link comes first; the navigation and the overview
// cards fit a phone.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { consoleSuite, shot } from "./harness.mjs";

const require = createRequire(import.meta.url);
// Evaluated through the DevTools protocol, so the console's script-src policy (which
// refuses inline scripts such as `addScriptTag` would add) does not apply to it.
const AXE_SOURCE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

let deck, browser, page;
const { go, waitForRows } = consoleSuite({}, (s) => ({ deck, browser, page } = s));

/** A pending job due in an hour: a job page in the active pillar, with its edit form. */
async function plantPendingJob() {
  const res = await fetch(deck.base + "/api/v1/jobs", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ queue: "e2e-a11y", type: "nobody.handles.this", payload: { n: 1 }, delay_ms: 3_600_000, tags: ["a11y"] }),
  });
  const body = await res.text();
  assert.equal(res.status, 201, body);
  return JSON.parse(body).id;
}

/** A batch with a dead member (a demo email to a mailbox that does not exist: fatal, so no
 * circuit breaker defers it) and one due in an hour: a batch page with a fired callback and
 * the resurrect action. */
async function plantBatch() {
  const res = await fetch(deck.base + "/api/v1/batches", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      description: "a11y batch",
      jobs: [
        { queue: "e2e-a11y-batch", type: "email.send", payload: { to: "bounce@a11y.example", template: "invoice" } },
        { queue: "e2e-a11y-batch", type: "billing.charge", payload: { invoice: "A11Y-2", amount_cents: 1 }, delay_ms: 3_600_000 },
      ],
      callbacks: { on_death: { queue: "e2e-a11y-batch", type: "demo.echo" }, on_complete: { queue: "e2e-a11y-batch", type: "demo.echo" } },
    }),
  });
  const body = await res.text();
  assert.equal(res.status, 201, body);
  return JSON.parse(body).batch.id;
}

const firstJobHref = () => page.locator("table.jobs tbody td.id a").first().getAttribute("href");

/** Every console page: each route of the app's router, each job list per pillar and state. */
let pages;
async function consolePages() {
  if (pages) return pages;
  const pending = await plantPendingJob();
  const batch = await plantBatch();
  await waitForRows("/", "[data-live=queues] tbody tr");
  await waitForRows("/jobs?source=archive", "table.jobs tbody tr");
  const archived = await firstJobHref();
  await waitForRows("/jobs?source=dlq", "table.jobs tbody tr");
  const dead = await firstJobHref();
  await waitForRows(`/batches/${batch}`, "#batch-members tr[data-state=dead]", 30);
  // A paused queue (its badge and border) and the flash messages after an action.
  const paused = await fetch(deck.base + "/api/v1/queues/e2e-a11y/pause", { method: "POST" });
  assert.ok(paused.ok, await paused.text());
  await go("/queues");
  const queue = (await page.locator("section.queue h2").first().innerText()).trim();
  pages = [
    "/",
    "/queues",
    "/queues?hidden=1",
    "/queues?ok=Queue%20e2e-a11y%20paused",
    "/jobs?source=dlq&err=Nothing%20selected",
    `/queues?q=${encodeURIComponent(queue)}`,
    "/jobs",
    ...["pending", "fetched", "processing"].map((s) => `/jobs?source=active&status=${s}`),
    "/jobs?source=archive",
    "/jobs?source=dlq",
    ...["Failed", "Fatal", "Timeout", "Cancelled", "Zombie", "HeartbeatFailure", "RetryLifetimeExpired", "Expired", "Throttled"]
      .map((r) => `/jobs?source=dlq&reason=${r}`),
    "/jobs?source=active&q=definitely-not-there-xyz",
    `/jobs/${pending}`,
    `/jobs/${pending}?edit=1`,
    archived,
    dead,
    `${dead}?edit=1`,
    "/jobs/not-a-job-id",
    "/dlq/bulk?source=dlq",
    "/dlq/bulk?source=dlq&action=purge",
    "/dlq/bulk/no-such-run",
    "/schedules",
    "/schedules/demo-nightly-digest",
    "/schedules/demo-nightly-digest?tz=Asia/Tokyo",
    "/schedules/no-such-schedule",
    "/batches",
    "/batches?before=not-a-batch-id",
    `/batches/${batch}`,
    "/batches/not-a-batch-id",
    "/batches/00000000-0000-7000-8000-000000000000",
    "/settings",
    "/instances",
    "/audit",
    "/no/such/page",
  ];
  return pages;
}

/** axe-core on the page as it is; the serious and critical violations, described. */
async function seriousViolations() {
  await page.evaluate(AXE_SOURCE);
  const results = await page.evaluate(() => window.axe.run(document, { resultTypes: ["violations"] }));
  return results.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .flatMap((v) =>
      v.nodes.map((n) => ({ id: v.id, impact: v.impact, target: n.target.join(" "), summary: n.failureSummary })),
    );
}

const THEMES = [
  { name: "system light", colorScheme: "light", cookie: null, expect: "blueprint" },
  { name: "system dark", colorScheme: "dark", cookie: null, expect: "carbon" },
  { name: "carbon chosen on a light system", colorScheme: "light", cookie: "carbon", expect: "carbon" },
  { name: "blueprint chosen on a dark system", colorScheme: "dark", cookie: "blueprint", expect: "blueprint" },
];

async function useTheme({ colorScheme, cookie }) {
  await page.emulateMedia({ colorScheme });
  await browser.context.clearCookies({ name: "deck_theme" });
  if (cookie) await browser.context.addCookies([{ name: "deck_theme", value: cookie, url: deck.base }]);
}

/** The theme the page shows, told by its background colour (dark: low luminance). */
const shownTheme = () =>
  page.evaluate(() => {
    const [r, g, b] = getComputedStyle(document.body).backgroundColor.match(/\d+/g).map(Number);
    return r + g + b < 3 * 128 ? "carbon" : "blueprint";
  });

for (const theme of THEMES) {
  test(`axe: no serious or critical violation on any page (${theme.name})`, async () => {
    const paths = await consolePages();
    await useTheme(theme);
    const found = [];
    for (const path of paths) {
      await go(path);
      assert.equal(await shownTheme(), theme.expect, `${path} shows the ${theme.expect} theme`);
      for (const v of await seriousViolations()) found.push({ path, ...v });
    }
    await useTheme({ colorScheme: "light", cookie: null });
    if (found.length) {
      const lines = found.map((v) => `${v.path}  [${v.impact}] ${v.id}  ${v.target}\n    ${v.summary.replace(/\n/g, "\n    ")}`);
      assert.fail(`${found.length} serious/critical axe violation(s) (${theme.name}):\n${lines.join("\n")}`);
    }
  });
}

test("axe on a phone: no serious or critical violation on the main pages, in both system themes", async () => {
  const paths = await consolePages();
  const main = ["/", "/queues", "/jobs?source=dlq", paths.find((p) => /^\/jobs\/[0-9a-f-]{36}$/.test(p)), "/dlq/bulk?source=dlq", "/batches", paths.find((p) => /^\/batches\/[0-9a-f-]{36}$/.test(p)), "/settings", "/audit", "/no/such/page"];
  await page.setViewportSize({ width: 390, height: 844 });
  const found = [];
  try {
    for (const colorScheme of ["light", "dark"]) {
      await useTheme({ colorScheme, cookie: null });
      for (const path of main) {
        await go(path);
        for (const v of await seriousViolations()) found.push({ path, colorScheme, ...v });
      }
    }
  } finally {
    await page.setViewportSize({ width: 1280, height: 800 });
    await useTheme({ colorScheme: "light", cookie: null });
  }
  assert.deepEqual(found, [], "serious/critical axe violations at 390 px");
});

test("an unknown console path answers 404 with the console's not-found page", async () => {
  for (const path of ["/no/such/page", "/queues/nope/deeper", "/jobs/123/extra"]) {
    const res = await go(path);
    assert.equal(res.status(), 404, path);
    assert.match(res.headers()["content-type"], /text\/html/);
    assert.match(await page.locator("main#content h1").innerText(), /not found/i);
    assert.ok(await page.locator("header.top nav.nav a[href='/queues']").isVisible(), "with the navigation");
    assert.ok(await page.locator("main a[href='/']").count(), "with a link back");
    assert.match(await page.title(), /· The Deck$/);
  }
  // The API keeps its own JSON error for unknown routes.
  const api = await fetch(deck.base + "/api/v1/no-such-route");
  assert.equal(api.status, 404);
  assert.match(api.headers.get("content-type"), /application\/json/);
  assert.equal((await api.json()).error.code, "no_such_route");
});

test("every page has its own title", async () => {
  const seen = new Map();
  for (const path of await consolePages()) {
    await go(path);
    const title = await page.title();
    assert.match(title, /^.+ · The Deck$/, `${path}: ${title}`);
    seen.set(path, title);
  }
  const main = ["/", "/queues", "/jobs", "/jobs?source=archive", "/jobs?source=dlq", "/dlq/bulk?source=dlq", "/settings", "/instances", "/audit", "/no/such/page"];
  const titles = main.map((p) => seen.get(p));
  assert.equal(new Set(titles).size, titles.length, `distinct titles: ${titles.join(" | ")}`);
  const job = [...seen].find(([p]) => /^\/jobs\/[0-9a-f-]{36}$/.test(p));
  assert.match(job[1], /^Job [0-9a-f]+/, "a job page names its job");
});

test("a skip link is the first thing in tab order and lands on the main content", async () => {
  await go("/queues");
  await page.keyboard.press("Tab");
  const focused = await page.evaluate(() => ({
    text: document.activeElement.textContent.trim(),
    href: document.activeElement.getAttribute("href"),
  }));
  assert.deepEqual(focused, { text: "Skip to content", href: "#content" });
  assert.ok(await page.locator(":focus").isVisible(), "visible when focused");
  await page.keyboard.press("Enter");
  assert.match(page.url(), /#content$/);
  assert.equal(await page.locator("main#content").count(), 1);
});

test("the theme follows the system until one is chosen with the switch", async () => {
  await useTheme({ colorScheme: "dark", cookie: null });
  await go("/");
  assert.equal(await shownTheme(), "carbon");
  assert.equal(await page.locator(".theme-switch:visible").count(), 1);
  await page.locator(".theme-switch:visible").click();
  assert.equal(await page.getAttribute("html", "data-theme"), "blueprint");
  assert.equal(await shownTheme(), "blueprint");
  await page.locator(".theme-switch:visible").click();
  assert.equal(await page.getAttribute("html", "data-theme"), "carbon");
  assert.equal(await shownTheme(), "carbon");
  // Whatever the state, exactly one switch shows, and it leads to the other theme.
  assert.equal(await page.locator(".theme-switch:visible").count(), 1);
  await page.locator(".theme-switch:visible").click();
  assert.equal(await page.getAttribute("html", "data-theme"), "blueprint");
  await useTheme({ colorScheme: "light", cookie: null });
  await go("/");
  assert.equal(await shownTheme(), "blueprint");
});

test("on a phone every navigation entry can be reached", async () => {
  await page.setViewportSize({ width: 390, height: 844 });
  try {
    await go("/");
    const links = page.locator("header.top nav.nav a");
    const n = await links.count();
    assert.ok(n >= 7);
    for (let i = 0; i < n; i++) {
      const link = links.nth(i);
      await link.scrollIntoViewIfNeeded();
      const box = await link.boundingBox();
      const label = await link.innerText();
      assert.ok(box && box.x >= 0 && box.x + box.width <= 390, `${label} inside the viewport: ${JSON.stringify(box)}`);
      // Nothing clips or covers it: the point at its centre is the link itself.
      const hit = await page.evaluate(({ x, y }) => document.elementFromPoint(x, y)?.closest("a")?.textContent, {
        x: box.x + box.width / 2,
        y: box.y + box.height / 2,
      });
      assert.equal(hit, label, `${label} is not covered`);
    }
  } finally {
    await page.setViewportSize({ width: 1280, height: 800 });
  }
});

test("overview cards fit eight-digit values and one-line labels, on desktop and phone, in both themes", async () => {
  await waitForRows("/", "[data-live=queues] tbody tr");
  for (const colorScheme of ["light", "dark"]) {
    await useTheme({ colorScheme, cookie: null });
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: width > 500 ? 800 : 844 });
      await go("/");
      const name = `overview-${colorScheme}-${width}`;
      await shot(page, name);
      // The same panel with the largest values we promise to fit, checked synchronously (a
      // live push could replace it between two steps otherwise).
      const problems = await page.evaluate(() => {
        const out = [];
        for (const card of document.querySelectorAll("[data-live=cards] .card")) {
          const value = card.querySelector(".card-value");
          const label = card.querySelector(".card-label");
          value.textContent = "12,345,678";
          const lineHeight = parseFloat(getComputedStyle(label).lineHeight);
          if (value.scrollWidth > value.clientWidth + 1 || card.scrollWidth > card.clientWidth + 1) out.push(`${label.textContent}: value overflows`);
          if (label.getBoundingClientRect().height > lineHeight * 1.5) out.push(`${label.textContent}: label wraps`);
        }
        const cards = [...document.querySelectorAll("[data-live=cards] .card")].map((c) => c.getBoundingClientRect());
        if (cards.some((r) => r.right > document.documentElement.clientWidth + 1)) out.push("a card leaves the viewport");
        return out;
      });
      await shot(page, `${name}-large-values`);
      assert.deepEqual(problems, [], `${name}`);
    }
  }
  await page.setViewportSize({ width: 1280, height: 800 });
  await useTheme({ colorScheme: "light", cookie: null });
});

test("the live event list can be scrolled from the keyboard and keeps focus across live updates", async () => {
  await waitForRows("/", "[data-live=queues] tbody tr");
  const events = page.locator("ol.events");
  assert.equal(await events.getAttribute("tabindex"), "0");
  assert.equal(await events.getAttribute("aria-label"), "Live events");
  await events.focus();
  await page.evaluate(() => document.querySelector("[data-live=events]").setAttribute("data-old", "1"));
  await page.waitForSelector("[data-live=events]:not([data-old])", { timeout: 15_000 });
  assert.equal(await page.evaluate(() => document.activeElement.matches("ol.events")), true);
});

test("keyboard focus walking back up a long list never lands under the sticky header", async () => {
  await waitForRows("/jobs?source=archive", "table.jobs tbody tr");
  // Start at the foot of the page and Shift+Tab upwards: each control the browser scrolls
  // back into view must show below the header, not behind it.
  await page.evaluate(() => {
    window.scrollTo(0, document.body.scrollHeight);
    const all = [...document.querySelectorAll("main a[href], main input, main button, main select")];
    all[all.length - 1].focus();
  });
  const covered = [];
  for (let i = 0; i < 40; i++) {
    await page.keyboard.press("Shift+Tab");
    const r = await page.evaluate(() => {
      const header = document.querySelector("header.top");
      const e = document.activeElement;
      return {
        top: e.getBoundingClientRect().top,
        headerBottom: header.getBoundingClientRect().bottom,
        inMain: !!e.closest("main"),
        what: e.outerHTML.slice(0, 80),
      };
    });
    if (r.inMain && r.top < r.headerBottom) covered.push(r);
  }
  assert.deepEqual(covered, [], "focused controls covered by the header");
  // An anchor target too: the skip link's #content lands below the header.
  await go("/jobs?source=archive#content");
  const gap = await page.evaluate(
    () => document.querySelector("main h1").getBoundingClientRect().top - document.querySelector("header.top").getBoundingClientRect().bottom,
  );
  assert.ok(gap >= 0, `the heading starts ${gap}px under the header's bottom edge`);
});

test("on a phone the error text of the job page, the dead-letter list and the audit log wraps on screen", async () => {
  await consolePages();
  // A dead letter with an error: its page lists the attempts' errors.
  await waitForRows("/jobs?source=dlq", "table.jobs tbody tr td.msg:not(:empty)");
  const dlqJob = await page.locator("table.jobs tbody tr:has(td.msg:not(:empty)) td.id a").first().getAttribute("href");
  // An audit entry with a detail: pause a queue from the API.
  const paused = await fetch(deck.base + "/api/v1/queues/e2e-a11y/pause", { method: "POST" });
  assert.ok(paused.ok, await paused.text());
  const checks = [
    [dlqJob, "table.stack td.wide", "job-phone"],
    ["/jobs?source=dlq", "table.jobs td.msg:not(:empty)", "dlq-phone"],
    ["/audit", "td.audit-detail", "audit-phone"],
  ];
  await page.setViewportSize({ width: 390, height: 844 });
  try {
    for (const [path, selector, name] of checks) {
      await go(path);
      const found = await page.evaluate((sel) => {
        const cells = [...document.querySelectorAll(sel)].slice(0, 10);
        return {
          pageWidth: document.documentElement.scrollWidth,
          cells: cells.map((c) => {
            const r = c.getBoundingClientRect();
            return { left: r.left, right: r.right, width: r.width, text: c.innerText.slice(0, 40) };
          }),
        };
      }, selector);
      await shot(page, name);
      assert.ok(found.cells.length > 0, `${path}: no ${selector}`);
      assert.ok(found.pageWidth <= 390, `${path}: the page is ${found.pageWidth}px wide`);
      for (const c of found.cells) {
        assert.ok(c.left >= 0 && c.right <= 390, `${path}: ${JSON.stringify(c)} leaves the screen`);
        assert.ok(c.width >= 300, `${path}: ${JSON.stringify(c)} is squeezed`);
      }
    }
  } finally {
    await page.setViewportSize({ width: 1280, height: 800 });
  }
});

test("every absolute time the console shows names its zone", async () => {
  const paths = await consolePages();
  const bare = [];
  for (const path of paths.filter((p) => !p.includes("edit=1"))) {
    await go(path);
    const found = await page.evaluate(() => {
      // A date with a time of day, not followed by a zone (UTC, CET, EST…) or an offset.
      const stamp = /\b\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?!\d|[:.]\d| ?(?:[A-Z]{2,5}\b|[+-]\d{2}|Z))/g;
      const texts = [document.querySelector("main").innerText];
      for (const e of document.querySelectorAll("main [title]")) texts.push(e.getAttribute("title"));
      // Payloads and results are the user's data, shown as written.
      for (const e of document.querySelectorAll("main pre.json, main textarea")) texts.push(`-${e.innerText}`);
      const out = [];
      for (const t of texts) {
        if (t.startsWith("-")) continue;
        for (const m of t.matchAll(stamp)) out.push(t.slice(Math.max(0, m.index - 30), m.index + 30));
      }
      return out;
    });
    for (const f of found) bare.push(`${path}: …${f}…`);
  }
  assert.deepEqual(bare, [], "times without a zone");
  // And the label is there: the audit log's times and a job's timeline say UTC.
  await go("/audit");
  assert.match(await page.locator("table.audit td.when").first().innerText(), /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$/);
});
