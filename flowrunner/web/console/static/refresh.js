// A page that refreshes itself while open (its flowrunner-refresh meta says how often):
// reloaded then, unless the reader is typing in a form, has ticked or changed something,
// or the tab is hidden — then it waits another period. ?refresh=off stops it.
(function () {
  "use strict";
  var meta = document.querySelector('meta[name="flowrunner-refresh"]');
  var seconds = meta ? parseInt(meta.getAttribute("content"), 10) : 0;
  if (!(seconds > 0)) return;
  var touched = false;
  document.addEventListener("input", function () { touched = true; });
  document.addEventListener("change", function () { touched = true; });
  function busy() {
    var active = document.activeElement;
    var typing = active && /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName);
    return touched || typing || document.hidden;
  }
  function tick() {
    if (busy()) {
      window.setTimeout(tick, seconds * 1000);
      return;
    }
    window.location.reload();
  }
  window.setTimeout(tick, seconds * 1000);
})();
