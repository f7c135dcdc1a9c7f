// Live refresh for The Deck (progressive enhancement: every page works without it).
// The overview's panels are rendered by the server once per tick and pushed over SSE
// (/live). Job lists, a job and the queues page are rendered by the server as a reload
// would, pushed when they change (/live/page), and their data-live-page regions swapped in
// unless the operator is working in them. The pause switch stops both until resumed.
(function () {
  "use strict";
  // "Select every job on this page": the header box ticks (or clears) the rows' boxes. It
  // needs this script, so it is shown by it (also in a table swapped in live).
  function enhance(root) {
    root.querySelectorAll("[data-select-all]").forEach(function (all) { all.hidden = false; });
  }
  document.addEventListener("change", function (e) {
    var all = e.target;
    if (!all.matches || !all.matches("[data-select-all]")) return;
    var table = all.closest("table");
    if (!table) return;
    table.querySelectorAll("tbody input[type=checkbox]").forEach(function (box) { box.checked = all.checked; });
  });
  // What the server sent for each live region, before this script changed it: a fresh
  // render is compared with that, not with the enhanced page.
  document.querySelectorAll("[data-live-page]").forEach(function (el) { el.__served = el.innerHTML; });
  enhance(document);
  if (!window.EventSource) return;
  var dot = document.querySelector("[data-live-status]");
  var toggle = document.querySelector("[data-live-toggle]");
  var PAUSED = "deck-live-paused";
  var source = null;

  function status(state) {
    if (!dot) return;
    dot.className = "live-dot " + state;
    dot.title = state === "on" ? "Live" : state === "paused" ? "Live updates paused" : "Reconnecting…";
  }

  // Trusted: rendered (and escaped) by the server's components.
  function fragment(html) {
    var t = document.createElement("template");
    t.innerHTML = html.trim();
    return t.content.firstElementChild;
  }

  // A scrolling panel (the event list, a wide table) keeps its scroll position, and
  // keyboard focus when it had it, across the swap.
  function swap(el, next) {
    var focused = document.activeElement === el;
    var top = el.scrollTop, left = el.scrollLeft;
    el.replaceWith(next);
    enhance(next);
    next.scrollTop = top;
    next.scrollLeft = left;
    if (focused && next.tabIndex >= 0) next.focus({ preventScroll: true });
  }

  // The operator is working in a region: focus on something inside it, a ticked box, an
  // open details. (Focus on the region itself is kept by swap.)
  function busy(el) {
    var active = document.activeElement;
    if (active && active !== el && el.contains(active)) return true;
    if (el.querySelector("input[type=checkbox]:checked, details[open]")) return true;
    return false;
  }

  function overview(e) {
    var panels;
    try { panels = JSON.parse(e.data); } catch (_) { return; }
    status("on");
    Object.keys(panels).forEach(function (key) {
      var el = document.querySelector('[data-live="' + key + '"]');
      if (!el) return;
      var fresh = fragment(panels[key]);
      if (fresh) swap(el, fresh);
    });
  }

  function page(e) {
    status("on");
    var doc = new DOMParser().parseFromString(e.data, "text/html");
    doc.querySelectorAll("[data-live-page]").forEach(function (fresh) {
      var key = fresh.getAttribute("data-live-page");
      var el = document.querySelector('[data-live-page="' + key + '"]');
      if (!el || busy(el) || el.__served === fresh.innerHTML) return;
      var next = document.importNode(fresh, true);
      next.__served = fresh.innerHTML;
      swap(el, next);
    });
  }

  function connect() {
    if (document.querySelector("[data-live]")) {
      source = new EventSource("/live");
      source.addEventListener("tick", overview);
    } else if (document.querySelector("[data-live-page]")) {
      source = new EventSource("/live/page?path=" + encodeURIComponent(location.pathname + location.search));
      source.addEventListener("page", page);
      source.addEventListener("gone", function () { status("off"); });
    } else {
      return;
    }
    source.onopen = function () { status("on"); };
    source.onerror = function () { status("off"); };
  }

  function paused() {
    try { return sessionStorage.getItem(PAUSED) === "1"; } catch (_) { return false; }
  }

  function setPaused(on) {
    try { sessionStorage.setItem(PAUSED, on ? "1" : "0"); } catch (_) {}
    if (on) {
      if (source) { source.close(); source = null; }
      status("paused");
    } else if (!source) {
      connect();
    }
    if (toggle) {
      toggle.textContent = on ? "Resume live" : "Pause live";
      toggle.setAttribute("aria-pressed", on ? "true" : "false");
    }
  }

  var live = document.querySelector("[data-live], [data-live-page]");
  if (!live) return;
  if (toggle) {
    toggle.hidden = false;
    toggle.addEventListener("click", function () { setPaused(!paused()); });
  }
  setPaused(paused());
})();
