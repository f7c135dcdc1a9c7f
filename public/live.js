// Live refresh for The Deck (progressive enhancement: every page works without it).
// The server renders each live panel with the same component as the page and pushes
// them over SSE once per tick; this swaps the fresh HTML in.
(function () {
  "use strict";
  if (!window.EventSource) return;
  var dot = document.querySelector("[data-live-status]");
  function status(on) { if (dot) { dot.className = "live-dot " + (on ? "on" : "off"); dot.title = on ? "Live" : "Reconnecting…"; } }
  if (!document.querySelector("[data-live]")) return;
  var source = new EventSource("/live");
  source.onopen = function () { status(true); };
  source.onerror = function () { status(false); };
  source.addEventListener("tick", function (e) {
    var panels;
    try { panels = JSON.parse(e.data); } catch (_) { return; }
    status(true);
    Object.keys(panels).forEach(function (key) {
      var el = document.querySelector('[data-live="' + key + '"]');
      if (!el) return;
      // Trusted: rendered (and escaped) by the server's components.
      var t = document.createElement("template");
      t.innerHTML = panels[key].trim();
      var next = t.content.firstElementChild;
      if (!next) return;
      // A scrolling panel (the event list, a wide table) keeps its scroll position, and
      // keyboard focus when it had it, across the swap.
      var focused = document.activeElement === el;
      var top = el.scrollTop, left = el.scrollLeft;
      el.replaceWith(next);
      next.scrollTop = top;
      next.scrollLeft = left;
      if (focused && next.tabIndex >= 0) next.focus({ preventScroll: true });
    });
  });
})();
