// The console under its Content-Security-Policy, in a real browser: every page, the live
// refresh and the forms work without a single violation; markup planted in a payload stays
// text; script injected into a page anyway is refused and reported; no other site can frame it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { consoleSuite } from "./harness.mjs";

let deck, browser, page, violations;
const { go, waitForRows } = consoleSuite({ csp: true }, (s) => ({ deck, browser, page, violations } = s));

const PAYLOAD = { note: "</textarea><script>window.__pwned=1</script>\"><img src=x onerror=window.__pwned=2>'><img src=x onerror=window.__pwned=3>" };

/** A pending job (due in an hour, so it stays editable) whose payload tries to break out. */
async function plantHostileJob() {
  const res = await fetch(deck.base + "/api/v1/jobs", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ queue: "e2e-hostile", type: "nobody.handles.this", payload: PAYLOAD, delay_ms: 3_600_000, tags: ["<b>tag</b>"] }),
  });
  const body = await res.text();
  assert.equal(res.status, 201, body);
  assert.match(res.headers.get("content-security-policy"), /script-src 'self';/, "the API answers with the policy too");
  return JSON.parse(body).id;
}

test("every page, the live refresh and the forms work under the policy, with no violation", async () => {
  const res = await go("/");
  const policy = res.headers()["content-security-policy"];
  assert.match(policy, /script-src 'self' 'nonce-[A-Za-z0-9_-]+';/);
  assert.doesNotMatch(policy, /unsafe/);
  assert.equal(res.headers()["x-frame-options"], "DENY");

  // live.js runs (script-src 'self') and its SSE stream connects (connect-src 'self'): a
  // panel is replaced by a fresh one pushed by the server.
  await waitForRows("/", "[data-live=queues] tbody tr");
  await page.evaluate(() => document.querySelector("[data-live=cards]").setAttribute("data-old", "1"));
  await page.waitForSelector("[data-live=cards]:not([data-old])", { timeout: 15_000 });
  await page.waitForSelector(".live-dot.on");

  const id = await plantHostileJob();
  await waitForRows("/jobs?source=archive", "table.jobs tbody tr");
  const archived = await page.locator("table.jobs tbody td.id a").first().getAttribute("href");
  for (const path of [
    "/queues", "/jobs", "/jobs?source=archive", "/jobs?source=dlq", archived, `/jobs/${id}`,
    `/jobs/${id}?edit=1`, "/dlq/bulk?source=dlq", "/settings", "/instances", "/audit",
  ]) {
    await go(path);
  }

  // Form posts and their redirects (form-action 'self'), the theme switch's redirect.
  await go("/queues");
  const card = page.locator("section.queue").first();
  await card.locator("button[value=pause]").click();
  await page.locator(".flash.ok").waitFor();
  await page.locator("section.queue.paused button[value=resume]").first().click();
  await page.locator(".flash.ok").waitFor();
  await page.click(".theme-switch");
  assert.equal(await page.getAttribute("html", "data-theme"), "carbon");
  await page.click(".theme-switch");

  assert.deepEqual(violations, [], "the console itself never trips its policy");
});

test("a payload that closes the edit box stays text in it", async () => {
  const id = await plantHostileJob();
  await go(`/jobs/${id}?edit=1`);
  const value = await page.inputValue("textarea[name=payload]");
  assert.deepEqual(JSON.parse(value), PAYLOAD, "the operator edits exactly the stored payload");
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.equal(await page.locator("img").count(), 0);
  assert.deepEqual(violations, [], "escaped, so there was nothing for the policy to block");
});

test("script injected into a page anyway is refused and reported", async () => {
  await go("/queues");
  violations.length = 0;
  const outcome = await page.evaluate(() => new Promise((resolve) => {
    const seen = [];
    const done = () => resolve({ seen, pwned: window.__pwned });
    document.addEventListener("securitypolicyviolation", (e) => {
      seen.push(e.effectiveDirective);
      if (seen.length === 2) done();
    });
    // What stored XSS would insert: an inline script and an inline event handler.
    const s = document.createElement("script");
    s.textContent = "window.__pwned = 'script'";
    document.body.append(s);
    const box = document.createElement("div");
    box.innerHTML = '<img src="/assets/favicon.svg" onload="window.__pwned = \'handler\'">';
    document.body.append(box);
    // A guard, not a wait: with the policy in force both reports come well before this.
    setTimeout(done, 10_000);
  }));
  assert.equal(outcome.pwned, undefined, "neither ran");
  assert.deepEqual(outcome.seen.sort(), ["script-src-attr", "script-src-elem"]);
  assert.ok(violations.length >= 2, "reported through the page too");
});

test("no other page can frame the console", async () => {
  const framer = await browser.context.newPage();
  await framer.setContent(`<iframe src="${deck.base}/queues" width="800" height="600"></iframe>`);
  const frame = framer.frames().find((f) => f !== framer.mainFrame());
  await frame.waitForLoadState();
  const framed = await frame.evaluate(() => document.body?.innerText ?? "").catch(() => "");
  assert.doesNotMatch(framed, /Queues/, "the console did not render inside another page");
  await framer.close();
});
