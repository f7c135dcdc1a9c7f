// Every console page and action, driven as an operator would, against a real
// `deck serve --demo`. One screenshot per page goes to end2end/screenshots/.
import { test } from "node:test";
import assert from "node:assert/strict";
import { consoleSuite, shot, startBrowser } from "./harness.mjs";

let deck, browser, page, violations;
const { go, waitForRows } = consoleSuite({ csp: true }, (s) => ({ deck, browser, page, violations } = s));

const flash = () => page.locator(".flash.ok, .flash.err").first().innerText();

test("overview shows cards, chart, queues and goes live", async () => {
  await waitForRows("/", "[data-live=queues] tbody tr");
  assert.equal(await page.locator(".card").count(), 9);
  assert.ok(await page.locator("svg.throughput").isVisible());
  // The live script swaps in server-rendered panels: mark the current one and wait until
  // it is replaced by a fresh one pushed over SSE.
  await page.evaluate(() => document.querySelector("[data-live=cards]").setAttribute("data-old", "1"));
  await page.waitForSelector("[data-live=cards]:not([data-old])", { timeout: 15_000 });
  await page.waitForSelector(".live-dot.on");
  await shot(page, "overview");
});

test("theme switch sticks across pages", async () => {
  await go("/");
  // No choice yet: the page follows the system's setting (light in this browser).
  assert.equal(await page.getAttribute("html", "data-theme"), null);
  await page.click(".theme-switch");
  assert.equal(await page.getAttribute("html", "data-theme"), "carbon");
  await go("/queues");
  assert.equal(await page.getAttribute("html", "data-theme"), "carbon");
  await go("/");
  await shot(page, "overview-carbon");
  await page.click(".theme-switch");
  assert.equal(await page.getAttribute("html", "data-theme"), "blueprint");
});

test("queues: pause, resume, limits, hide and show", async () => {
  await go("/queues");
  const card = page.locator("section.queue").first();
  const name = (await card.locator("h2").innerText()).trim();
  await card.locator("button[value=pause]").click();
  assert.match(await flash(), new RegExp(`Queue ${name} paused`));
  assert.ok(await page.locator(`#queue-${name} .badge.warn`).isVisible());
  await shot(page, "queues");
  await page.locator(`#queue-${name} button[value=resume]`).click();
  assert.match(await flash(), /resumed/);

  await page.locator(`#queue-${name} details.limits summary`).click();
  await page.locator(`#queue-${name} input[name=max_workers]`).fill("3");
  await page.locator(`#queue-${name} input[name=execution_timeout]`).fill("120");
  await page.locator(`#queue-${name} .limits-form button`).click();
  assert.match(await flash(), /max workers 3/);
  assert.match(await page.locator(`#queue-${name} details.limits summary`).innerText(), /max workers 3/);

  await page.locator(`#queue-${name} button[value=hide]`).click();
  assert.equal(await page.locator(`#queue-${name}`).count(), 0, "hidden queues leave the default view");
  await page.click("text=/Show \\d+ hidden/");
  await page.locator(`#queue-${name} button[value=show]`).click();
  assert.match(await flash(), /shown/);
});

test("schedules: the demo's schedules run, run now, pause and resume, a schedule created in the form, next occurrences in a chosen zone", async () => {
  // The demo's every-15-seconds schedule has a last run within ~15 s of the start.
  await waitForRows("/schedules", 'tr[data-schedule="demo-ledger-sync"] td.last-run a.job-link', 30);
  const row = page.locator('tr[data-schedule="demo-ledger-sync"]');
  assert.ok(await row.locator("td.next-run time").isVisible());
  await shot(page, "schedules");

  await page.locator('tr[data-schedule="demo-nightly-digest"] td.name a').click();
  const occurrences = page.locator("#next-occurrences li time");
  assert.equal(await occurrences.count(), 5);
  await page.fill("#tz-form input[name=tz]", "Asia/Tokyo");
  await page.locator("#tz-form button").click();
  // 02:30 in Berlin is 10:30 in Tokyo in winter, 09:30 in summer.
  assert.match(await occurrences.first().innerText(), /(10|09):30:00/);
  await shot(page, "schedule");

  await page.locator("form[action$='/fn/schedule/run'] button").first().click();
  assert.match(await flash(), /demo-nightly-digest/);
  await page.locator("#schedule-history a.job-link").first().click();
  assert.match(page.url(), /\/jobs\//);

  await go("/schedules");
  await page.fill("#new-schedule input[name=name]", "e2e-every-minute");
  await page.fill("#new-schedule input[name=expr]", "* * * * *");
  await page.fill("#new-schedule input[name=queue]", "default");
  await page.fill("#new-schedule input[name=job_type]", "demo.echo");
  await page.locator("#new-schedule button", { hasText: "Create schedule" }).click();
  assert.match(await flash(), /e2e-every-minute/);
  await go("/schedules");
  const created = page.locator('tr[data-schedule="e2e-every-minute"]');
  await created.locator("button[value=pause]").click();
  assert.ok(await page.locator('tr[data-schedule="e2e-every-minute"] [data-state=paused]').isVisible());
  await page.locator('tr[data-schedule="e2e-every-minute"] button[value=resume]').click();
  assert.ok(await page.locator('tr[data-schedule="e2e-every-minute"] [data-state=enabled]').isVisible());

  await go("/schedules");
  await page.fill("#new-schedule input[name=name]", "e2e-bad");
  await page.fill("#new-schedule input[name=expr]", "* * *");
  await page.fill("#new-schedule input[name=queue]", "default");
  await page.fill("#new-schedule input[name=job_type]", "demo.echo");
  await page.locator("#new-schedule button", { hasText: "Create schedule" }).click();
  assert.match(await page.locator("#schedule-form-problem").innerText(), /cron/);
  assert.equal(await page.locator('tr[data-schedule="e2e-bad"]').count(), 0);
});

/** A batch of two demo emails in a queue of this test's own, one to a mailbox that does not
 * exist: a fatal error, dead at its first attempt. Fatal errors open no circuit breaker, so a
 * breaker the demo's own failing charges opened (it defers its type for 30 s) cannot hold
 * the members back. */
async function plantBatch() {
  const email = (to) => ({
    queue: "e2e-batch",
    type: "email.send",
    payload: { to, template: "invoice" },
  });
  const callback = (notify) => ({ queue: "e2e-batch", type: "demo.echo", payload: { notify } });
  const res = await fetch(deck.base + "/api/v1/batches", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      description: "e2e invoices",
      jobs: [email("ada@e2e.example"), email("bounce@e2e.example")],
      callbacks: { on_success: callback("all paid"), on_death: callback("a charge died") },
    }),
  });
  const body = await res.text();
  assert.equal(res.status, 201, body);
  const created = JSON.parse(body);
  return { id: created.batch.id, members: created.job_ids };
}

test("batches: progress in words, callbacks linked to their jobs, members; resurrecting the dead member reopens the batch", async () => {
  const { id, members } = await plantBatch();
  // Finished with a death: both members final (the other one may still run a moment after the first died).
  await waitForRows(`/batches/${id}`, "#batch-counts [data-state=dead]", 30);
  assert.equal(await page.locator("#batch-members tbody tr").count(), 2);
  assert.equal((await page.locator(".batch-progress .progress-text").innerText()).trim(), "2 of 2 done, 1 dead");
  assert.equal((await page.locator("#batch-counts [data-state]").innerText()).trim(), "finished with deaths");
  assert.match(await page.locator("#batch-callbacks tr[data-callback=success] .status").innerText(), /not fired/);
  assert.match(await page.locator("#reopen-note").innerText(), /reopens the batch/);
  await shot(page, "batch");

  // The death callback fired: its link opens the job it became.
  await page.locator("#batch-callbacks tr[data-callback=death] a.job-link").click();
  assert.match(page.url(), /\/jobs\/[0-9a-f-]{36}$/);
  assert.match(await page.locator("dl.meta").innerText(), /demo\.echo/);

  // Held in a paused queue, the resurrected member stays pending: the batch is open again.
  const paused = await fetch(deck.base + "/api/v1/queues/e2e-batch/pause", { method: "POST" });
  assert.ok(paused.ok, await paused.text());
  try {
    await go(`/batches/${id}`);
    await page.locator("#batch-members tr[data-state=dead] form[action$='/fn/job/resurrect'] button").click();
    assert.match(await flash(), /resurrected/);
    assert.match(page.url(), new RegExp(`/batches/${id}\\?`));
    assert.equal((await page.locator("#batch-counts [data-state]").innerText()).trim(), "running");
    assert.equal((await page.locator(".batch-progress .progress-text").innerText()).trim(), "1 of 2 done");
    assert.equal(await page.locator("#batch-members tr[data-state=dead]").count(), 0);
  } finally {
    await fetch(deck.base + "/api/v1/queues/e2e-batch/resume", { method: "POST" });
  }

  // A member's page links back to its batch.
  await go(`/jobs/${members[0]}`);
  await page.locator(`[data-batch] a[href="/batches/${id}"]`).click();
  assert.match(page.url(), new RegExp(`/batches/${id}$`));

  // The list: newest first, this batch among the demo's, reached from the navigation.
  await go("/");
  await page.locator('nav.nav a[href="/batches"]').click();
  const row = page.locator(`#batches tr[data-batch="${id}"]`);
  assert.equal((await row.locator("td.description").innerText()).trim(), "e2e invoices");
  assert.match(await row.locator(".progress-text").innerText(), /of 2 done/);
  assert.equal(await row.locator('[data-callback=death][data-fired=yes] a.job-link').count(), 1);
  await shot(page, "batches");
});

test("jobs: sources, filters in the URL, sort and keyset paging", async () => {
  await waitForRows("/jobs?source=archive", "table.jobs tbody tr");
  await page.selectOption("select[name=queue]", { index: 1 });
  await page.click(".filters button[type=submit]");
  assert.match(page.url(), /source=archive&queue=/);
  await page.click("th >> text=Prio");
  assert.match(page.url(), /sort=priority/);
  const older = page.locator(".pager a", { hasText: "Older" });
  if (await older.count()) {
    const first = await page.locator("table.jobs tbody tr td.id").first().innerText();
    await older.click();
    assert.match(page.url(), /after=/);
    assert.notEqual(await page.locator("table.jobs tbody tr td.id").first().innerText(), first);
  }
  await shot(page, "jobs-archive");
  await go("/jobs?source=active&q=definitely-not-there-xyz");
  assert.match(await page.locator(".empty").innerText(), /No jobs match/);
});

test("jobs: the list says how many match; payloads are searched when asked", async () => {
  const res = await fetch(deck.base + "/api/v1/jobs", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ queue: "e2e-search", type: "nobody.handles.this", payload: { order: "ord-e2e-77341" }, delay_ms: 3_600_000, tags: ["e2e-search"] }),
  });
  assert.equal(res.status, 201);
  const { id } = await res.json();
  await go("/jobs?source=active&queue=e2e-search");
  assert.match(await page.locator(".list-count").innerText(), /^1 job match$/);
  await go("/jobs?source=active");
  await page.fill("input[name=q]", "ord-e2e-77341");
  await page.click(".filters button[type=submit]");
  assert.match(await page.locator(".empty").innerText(), /No jobs match/, "payloads are not searched by default");
  assert.match(await page.locator(".list-count").innerText(), /^0 jobs/);
  await page.check("input[name=payload]");
  await page.click(".filters button[type=submit]");
  assert.match(page.url(), /payload=1/);
  assert.ok(await page.isChecked("input[name=payload]"), "the box stays ticked");
  assert.equal(await page.locator(`table.jobs tbody tr a[href*="${id}"]`).count() > 0, true, "the job is the match");
  assert.equal(await page.locator("table.jobs tbody tr").count(), 1);
  assert.match(await page.locator("table.jobs tbody tr").innerText(), /nobody\.handles\.this/);
  assert.match(await page.locator(".list-count").innerText(), /^1 job match/);
  await shot(page, "jobs-payload-search");
});

test("dead letters: inspect, edit with diff, save and resurrect", async () => {
  await waitForRows("/jobs?source=dlq", "table.jobs tbody tr");
  await shot(page, "jobs-dlq");
  await page.locator("table.jobs tbody tr td.id a").first().click();
  assert.match(page.url(), /\/jobs\/[0-9a-f-]{36}(\?|$)/);
  await shot(page, "job");
  // Its attempt history: the run that killed it, and a link to the dead letters failing alike.
  const last = page.locator("table.attempts tbody tr").last();
  assert.ok(await last.isVisible(), "the attempts are listed");
  assert.equal(await last.getAttribute("data-outcome"), "dead_lettered");
  const group = await page.locator("[data-error-group] a").getAttribute("href");
  assert.match(group, /^\/jobs\?source=dlq&group=[0-9a-f]{16}$/);
  const deadId = page.url().match(/\/jobs\/([0-9a-f-]{36})/)[1];
  // The same id searched on the Active tab names the job where it is.
  await go(`/jobs?source=active&q=${deadId}`);
  assert.ok(await page.locator(`[data-found-elsewhere="${deadId}"] a`).isVisible(), "found in the dead letters");
  await page.locator(`[data-found-elsewhere="${deadId}"] a`).click();
  assert.match(page.url(), new RegExp(`/jobs/${deadId}$`));
  await go(group);
  assert.ok(await page.locator(`table.jobs tbody tr a[href*="${deadId}"]`).count() > 0, "the group lists it");
  await go(`/jobs/${deadId}`);
  await page.click("text=Edit…");
  await page.fill("textarea[name=payload]", "{ not json");
  await page.click("text=Preview changes");
  assert.match(await flash(), /not valid JSON/);
  assert.equal(await page.inputValue("textarea[name=payload]"), "{ not json", "typed text is kept");
  await page.fill("textarea[name=payload]", '{"edited_by_e2e": true}');
  await page.fill("input[name=tags]", "e2e, fixed");
  await page.click("text=Preview changes");
  assert.ok(await page.locator("pre.diff .d-add", { hasText: "edited_by_e2e" }).isVisible(), "diff shows the new line");
  await shot(page, "job-edit-diff");
  await page.click("button[value=save_resurrect]");
  assert.match(await flash(), /resurrected/);
  assert.match(await page.locator("pre.json").first().innerText(), /edited_by_e2e/);
  assert.ok(await page.locator("text=Original payload").isVisible(), "original kept");
});

test("dead letters: retry selected rows, then purge one with confirmation", async () => {
  await waitForRows("/jobs?source=dlq", "table.jobs tbody tr");
  const boxes = page.locator("table.jobs tbody input[type=checkbox]");
  await boxes.nth(0).check();
  if ((await boxes.count()) > 1) await boxes.nth(1).check();
  await page.click("button[value=resurrect]");
  assert.match(await flash(), /resurrect: [12] of [12] selected/);

  await waitForRows("/jobs?source=dlq", "table.jobs tbody tr");
  await page.locator("table.jobs tbody td.id a").first().click();
  const url = page.url();
  await page.check(".confirm-form input[name=confirm]");
  await page.click(".confirm-form button.danger");
  assert.match(await flash(), /purged/);
  await page.goto(url);
  assert.match(await page.locator(".empty").innerText(), /No job/);
});

test("dead letters: bulk by filter with preview, typed confirmation and progress", async () => {
  await waitForRows("/jobs?source=dlq", "table.jobs tbody tr");
  await page.click("text=Bulk by filter…");
  assert.match(await page.locator(".big").first().innerText(), /matching dead letters/);
  await shot(page, "dlq-bulk");
  await page.fill("input[name=cap]", "5");
  await page.fill("input[name=confirm]", "RESURRECT");
  // Resurrect is not destructive: not coloured as a danger.
  assert.equal(await page.locator(".bulk-run button.danger").count(), 0);
  await page.click(".bulk-run button[type=submit]");
  assert.match(page.url(), /\/dlq\/bulk\/[0-9a-f]{32}/);
  await page.waitForSelector("[data-run-finished=true]", { timeout: 30_000 });
  assert.match(await page.locator(".run-state").innerText(), /done: [1-5] job/);
  // Progress counts against what matched (at most the cap of 5), not a bigger number.
  assert.ok(Number(await page.locator("progress").getAttribute("value")) === 100, "a finished run is full");
  await shot(page, "dlq-bulk-run");
});

test("active jobs: a flood cleared by filter — priority, then cancel — and run now for one", async () => {
  const post = (path, body) =>
    fetch(deck.base + path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const jobs = Array.from({ length: 30 }, (_, i) => ({ queue: "e2e-flood", type: "demo.echo", payload: { i }, delay_ms: 3_600_000 }));
  assert.equal((await post("/api/v1/jobs/batch", { jobs })).status, 201);
  // The scheduled list shows exactly the delayed jobs; its bulk button carries the filter.
  await waitForRows("/jobs?source=active&queue=e2e-flood&status=scheduled", "table.jobs tbody tr");
  assert.match(await page.locator(".list-count").innerText(), /^30 jobs match/);
  await page.click("text=bulk by filter…");
  assert.match(page.url(), /\/bulk\?source=active/);
  assert.match(await page.locator(".big").first().innerText(), /30 matching active jobs/);
  await page.click("nav.tabs >> text=Change priority");
  await page.fill("input[name=priority]", "5");
  assert.equal(await page.locator(".bulk-run input[name=confirm]").count(), 0, "no typed word for a priority change");
  await page.click(".bulk-run button[type=submit]");
  assert.match(page.url(), /\/bulk\/[0-9a-f]{32}/);
  await page.waitForSelector("[data-run-finished=true]", { timeout: 30_000 });
  assert.match(await page.locator(".run-state").innerText(), /done: 30 job/);
  await shot(page, "active-bulk-run");

  await go("/bulk?source=active&queue=e2e-flood&status=scheduled&action=cancel");
  assert.ok(await page.locator(".bulk-run button.danger").isVisible(), "cancel is destructive");
  await page.fill("input[name=confirm]", "CANCEL");
  await page.click(".bulk-run button[type=submit]");
  await page.waitForSelector("[data-run-finished=true]", { timeout: 30_000 });
  assert.match(await page.locator(".run-state").innerText(), /done: 30 job/);
  await go("/jobs?source=active&queue=e2e-flood");
  assert.match(await page.locator(".list-count").innerText(), /^0 jobs/);
  await go("/audit");
  assert.match(await page.locator("main").innerText(), /active\.bulk_cancel/);

  // One job waiting for later: Run now makes it due without spending an attempt.
  const one = await (await post("/api/v1/jobs", { queue: "e2e-flood", type: "demo.echo", payload: {}, delay_ms: 3_600_000 })).json();
  await go(`/jobs/${one.id}`);
  await page.click("form[action='/fn/job/run_now'] button");
  assert.match(await flash(), /Due now/);
});

test("active jobs: cancel a pending job", async () => {
  await waitForRows("/jobs?source=active&status=pending", "table.jobs tbody tr");
  await page.locator("table.jobs tbody td.id a").first().click();
  const cancel = page.locator("form[action='/fn/job/cancel'] button");
  if ((await cancel.count()) === 0) return; // it was claimed meanwhile; nothing to cancel
  // Claimed and started meanwhile: stopping a running job is asked first.
  const ask = page.locator("form[action='/fn/job/cancel'] input[name=confirm]");
  if ((await ask.count()) > 0) await ask.check();
  await cancel.click();
  assert.match(await flash(), /cancel|Nothing to cancel/i);
});

test("a job page and the archive list go live without a reload, and pause holds them", async () => {
  const res = await fetch(deck.base + "/api/v1/jobs", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ queue: "e2e-live", type: "demo.echo", payload: { live: true }, delay_ms: 4000 }),
  });
  assert.equal(res.status, 201);
  const { id } = await res.json();
  await go(`/jobs/${id}`);
  assert.match(await page.locator("[data-live-page=meta] .badge").first().innerText(), /pending/);
  await page.evaluate(() => { window.__sameDocument = true; });
  // The job becomes due, runs and succeeds; the page shows it while it stays the same page.
  await page.waitForFunction(
    () => /succeeded/.test(document.querySelector("[data-live-page=meta]")?.innerText || ""),
    null,
    { timeout: 30_000 },
  );
  assert.equal(await page.evaluate(() => window.__sameDocument), true, "no reload happened");
  assert.match(await page.locator("[data-live-page=timeline]").innerText(), /Ran/);

  // Paused: the toggle stops the stream until resumed (remembered for the tab).
  await go("/jobs?source=archive&queue=e2e-live");
  const toggle = page.locator("[data-live-toggle]");
  await toggle.waitFor({ state: "visible" });
  await toggle.click();
  assert.equal(await toggle.getAttribute("aria-pressed"), "true");
  assert.match(await page.locator("[data-live-status]").getAttribute("class"), /paused/);
  await page.reload();
  assert.equal(await page.locator("[data-live-toggle]").getAttribute("aria-pressed"), "true", "pause survives a reload");
  await page.locator("[data-live-toggle]").click();
  assert.equal(await page.locator("[data-live-toggle]").getAttribute("aria-pressed"), "false");

  // A new archived job shows up in the list in view without a reload.
  await page.evaluate(() => { window.__sameDocument = true; });
  const before = await page.locator("[data-live-page=rows] tbody tr").count();
  const again = await fetch(deck.base + "/api/v1/jobs", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ queue: "e2e-live", type: "demo.echo", payload: { live: 2 } }),
  });
  assert.equal(again.status, 201);
  await page.waitForFunction(
    (n) => document.querySelectorAll("[data-live-page=rows] tbody tr").length > n,
    before,
    { timeout: 30_000 },
  );
  assert.equal(await page.evaluate(() => window.__sameDocument), true, "no reload happened");
});

test("a running job shows its progress on its page and in the list; the queues page shows run times per type", async () => {
  const res = await fetch(deck.base + "/api/v1/jobs", {
    method: "POST",
    headers: { "content-type": "application/json" },
    // Not media.transcode: the demo's own transcodes time out on purpose, and five timeouts
    // in a minute open that type's circuit breaker, which defers every transcode for 30 s.
    // Reports fail only by panicking, which is fatal and leaves their breaker closed.
    body: JSON.stringify({ queue: "e2e-progress", type: "report.generate", payload: { name: "e2e", seconds: 10 } }),
  });
  assert.equal(res.status, 201);
  const { id } = await res.json();
  await go(`/jobs/${id}`);
  // The handler reports a page a second; the page follows it live.
  await page.waitForFunction(
    () => Number(document.querySelector("[data-live-page=meta] progress")?.getAttribute("value") || 0) > 0,
    null,
    { timeout: 30_000 },
  );
  const meta = await page.locator("[data-live-page=meta]").innerText();
  assert.match(meta, /page \d+ of 10/, "the handler's message is shown");
  assert.match(await page.locator("[data-live-page=timeline]").innerText(), /Running for/i);
  await shot(page, "job-progress");

  await go("/jobs?source=active&queue=e2e-progress");
  const bar = page.locator("[data-live-page=rows] tbody tr progress").first();
  await bar.waitFor({ state: "attached", timeout: 20_000 });
  assert.ok(Number(await bar.getAttribute("value")) > 0);

  // Per job type p50 / p95 over the last hour, from the demo's finished work.
  await waitForRows("/queues", "#run-times tbody tr");
  const types = await page.locator("#run-times tbody tr td:first-child").allInnerTexts();
  assert.ok(types.includes("demo.echo") || types.includes("email.send"), types.join(", "));
  const cells = await page.locator("#run-times tbody tr").first().locator("td.num").allInnerTexts();
  assert.equal(cells.length, 3, "runs, p50, p95");
  assert.match(cells[1], /ms|s/);
  await shot(page, "queues-run-times");
});

test("lists: select the whole page, the full error on hover, back to the filtered list, event links", async () => {
  await waitForRows("/jobs?source=archive&queue=e2e-live&sort=created&dir=asc", "table.jobs tbody tr");
  const all = page.locator("[data-select-all]");
  await all.check();
  const boxes = page.locator("table.jobs tbody input[type=checkbox]");
  const n = await boxes.count();
  for (let i = 0; i < n; i++) assert.ok(await boxes.nth(i).isChecked(), `row ${i} ticked`);
  await all.uncheck();
  assert.equal(await page.locator("table.jobs tbody input[type=checkbox]:checked").count(), 0);

  await page.locator("table.jobs tbody td.id a").first().click();
  await page.click("text=← back to the list");
  assert.match(page.url(), /source=archive/);
  assert.match(page.url(), /queue=e2e-live/);
  assert.match(page.url(), /sort=created/);

  await waitForRows("/jobs?source=dlq", "table.jobs tbody td.msg");
  const msg = page.locator("table.jobs tbody td.msg").first();
  assert.equal(await msg.getAttribute("title"), (await msg.innerText()).trim());

  // Live events about a job link to it (the demo dead-letters some jobs as it runs).
  await go("/");
  await page.waitForSelector("[data-live=events] a[href^='/jobs/']", { timeout: 90_000 });
});

test("settings are saved and shown back", async () => {
  await go("/settings");
  await page.fill("input[name=worker_count]", "7");
  await page.fill("input[name=max_attempts]", "4");
  await page.click("text=Save settings");
  assert.match(await flash(), /Settings saved/);
  assert.equal(await page.inputValue("input[name=worker_count]"), "7");
  await page.fill("input[name=worker_count]", "0");
  await page.click("text=Save settings");
  assert.match(await flash(), /Not saved: .*workers must be from 1/);
  // Durations read and write as an operator writes them.
  await page.fill("input[name=worker_count]", "7");
  await page.fill("input[name=base_delay]", "2s");
  await page.fill("input[name=max_delay]", "1h 30m");
  await page.click("text=Save settings");
  assert.match(await flash(), /Settings saved/);
  assert.equal(await page.inputValue("input[name=base_delay]"), "2s");
  assert.equal(await page.inputValue("input[name=max_delay]"), "1h 30m");
  await page.fill("input[name=base_delay]", "2h");
  await page.click("text=Save settings");
  assert.match(await flash(), /base delay .* must not be larger than max delay/);
  await shot(page, "settings");
});

test("instances list this engine", async () => {
  await go("/instances");
  assert.ok((await page.locator("table tbody tr").count()) >= 1);
  await shot(page, "instances");
});

test("audit log records every action with its actor", async () => {
  await go("/audit");
  const text = await page.locator("table.audit").innerText();
  for (const action of ["queue.pause", "queue.resume", "queue.update", "job.edit_resurrect", "jobs.bulk_resurrect", "job.purge", "dlq.bulk_resurrect", "settings.save"]) {
    assert.ok(text.includes(action), `audit has ${action}`);
  }
  assert.match(text, /local/);
  // A settings change shows the fields it changed, not raw JSON.
  assert.match(text, /retry\.base_delay_ms: \d+ → 2000/);
  assert.ok(!text.includes('"before"'), "no raw settings JSON");
  await shot(page, "audit");
  // Filter by action family: only queue actions are left.
  await page.selectOption("select[name=action]", "queue");
  await page.click(".filters button[type=submit]");
  const actions = await page.locator("table.audit tbody td:nth-child(3)").allInnerTexts();
  assert.ok(actions.length > 0 && actions.every((a) => a.startsWith("queue.")), actions.join(","));
  await go("/audit?actor=nobody-at-all");
  assert.match(await page.locator(".empty").innerText(), /No audit entries match/);
});

test("forms without the CSRF token or from another origin are refused", async () => {
  const res = await page.request.post(deck.base + "/fn/queue/state", {
    form: { queue: "default", op: "pause", back: "/" },
    maxRedirects: 0,
  });
  assert.equal(res.status(), 403);
  const cookies = await browser.context.cookies(deck.base);
  const csrf = cookies.find((c) => c.name === "deck_csrf")?.value;
  assert.ok(csrf, "the console set a CSRF cookie");
  const cross = await page.request.post(deck.base + "/fn/queue/state", {
    form: { csrf, queue: "default", op: "pause", back: "/" },
    headers: { Origin: "https://evil.example" },
    maxRedirects: 0,
  });
  assert.equal(cross.status(), 403);
});

test("works with JavaScript off and on a phone", async () => {
  const plain = await startBrowser({ javaScriptEnabled: false });
  const noJs = await plain.context.newPage();
  await noJs.goto(deck.base + "/queues");
  const name = (await noJs.locator("section.queue h2").first().innerText()).trim();
  await noJs.locator("section.queue").first().locator("button[value=pause]").click();
  assert.match(await noJs.locator(".flash.ok").innerText(), new RegExp(`${name} paused`));
  await noJs.locator(`#queue-${name} button[value=resume]`).click();
  await plain.close();

  await page.setViewportSize({ width: 390, height: 844 });
  await go("/");
  await shot(page, "overview-phone");
  await go("/jobs?source=dlq");
  await shot(page, "jobs-phone");
  await page.setViewportSize({ width: 1280, height: 800 });
});

test("no page or action above tripped the Content-Security-Policy", () => {
  assert.deepEqual(violations, []);
});

// Error groups (issue 16): failures that differ only in ids, addresses or numbers share one
// fingerprint group; the overview links each group to its dead letters and to the bulk flow
// with the group preselected. Self-contained: it waits for the demo to produce a group.
test("error groups: a group's dead letters and resurrecting the group through the bulk flow", async () => {
  await waitForRows("/", "[data-live=errors] tr[data-group]");
  const row = page.locator("[data-live=errors] tr[data-group]").first();
  const fp = await row.getAttribute("data-group");
  assert.match(fp, /^[0-9a-f]{16}$/);
  assert.ok((await row.locator("td.group-msg .sample").innerText()).trim().length > 0, "a sample message");

  await go(`/jobs?source=dlq&group=${fp}`);
  assert.equal(await page.inputValue("input[name=group]"), fp, "the list keeps the group filter");
  const listed = await page.locator("table.jobs tbody tr").count();

  await go("/");
  await page.locator(`[data-live=errors] tr[data-group="${fp}"] a`, { hasText: "Resurrect group" }).click();
  assert.match(page.url(), new RegExp(`/dlq/bulk\\?.*group=${fp}.*action=resurrect`));
  assert.match(await page.locator("section.panel p").first().innerText(), new RegExp(`group = ${fp}`));
  if (listed === 0) return; // resurrected by an earlier test meanwhile; nothing to run
  await page.fill("input[name=cap]", "5");
  await page.fill("input[name=confirm]", "RESURRECT");
  await page.click(".bulk-run button[type=submit]");
  assert.match(page.url(), /\/dlq\/bulk\/[0-9a-f]{32}/);
  await page.waitForSelector("[data-run-finished=true]", { timeout: 30_000 });
  assert.match(await page.locator(".run-state").innerText(), /done: \d+ job/);
  assert.match(await page.locator("section.panel").innerText(), new RegExp(`group=${fp}`));
  assert.deepEqual(violations, [], "no CSP violation on the error-group pages");
});
