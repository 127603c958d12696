// The flowrunner console's few lines of script. Every page works without them; with
// them a condition or duration is judged as it is typed (the sentence a save would
// give, with a caret under the place), a new step's form shows the columns its kind
// reads, a list of runs can be ticked all at once, and a refused save returns the
// reader to the field whose sentence says why.
(function () {
  "use strict";

  var timers = new WeakMap();

  function formOf(element) {
    var id = element.getAttribute("form");
    return id ? document.getElementById(id) : element.form;
  }

  function kindOf(input) {
    var form = formOf(input);
    var id = form && form.id;
    var select = id && document.querySelector('select[name="kind"][form="' + id + '"]');
    if (!select && form) select = form.querySelector('select[name="kind"]');
    return select ? select.value : input.dataset.kind || "flow";
  }

  function show(input, answer) {
    var out = document.getElementById(input.id + "-check");
    if (!out) return;
    out.textContent = "";
    if (answer.ok) {
      out.hidden = true;
      input.removeAttribute("aria-invalid");
      return;
    }
    input.setAttribute("aria-invalid", "true");
    var sentence = document.createElement("span");
    sentence.textContent = answer.message;
    out.appendChild(sentence);
    if (answer.line) {
      var row = input.value.split("\n")[answer.line - 1] || "";
      var pre = document.createElement("pre");
      pre.textContent = row + "\n" + " ".repeat(Math.max(0, answer.column - 1)) + "^";
      out.appendChild(pre);
    }
    out.hidden = false;
  }

  function check(input) {
    var query = new URLSearchParams({
      column: input.dataset.column,
      kind: kindOf(input),
      text: input.value,
    });
    fetch(input.dataset.check + "?" + query.toString(), {
      credentials: "same-origin",
      headers: { accept: "application/json" },
    })
      .then(function (response) { return response.json(); })
      .then(function (answer) { show(input, answer); })
      .catch(function () { /* the save judges it anyway */ });
  }

  document.addEventListener("input", function (event) {
    var input = event.target;
    if (!(input instanceof HTMLElement) || !input.matches("[data-check]")) return;
    clearTimeout(timers.get(input));
    timers.set(input, setTimeout(function () { check(input); }, 200));
  });

  // A new step's form: the columns its kind reads (and any already filled in).
  function fit(select) {
    var form = formOf(select);
    if (!form) return;
    form.querySelectorAll("[data-kinds]").forEach(function (field) {
      var kinds = field.dataset.kinds.split(" ");
      var input = field.querySelector("input, textarea, select");
      var filled = input && input.value.trim() !== "";
      field.hidden = !filled && (select.value === "" || kinds.indexOf(select.value) < 0);
    });
  }

  document.addEventListener("change", function (event) {
    var target = event.target;
    if (!(target instanceof HTMLElement)) return;
    if (target.matches("select[data-fit]")) fit(target);
    if (target.matches("[data-select-all]")) {
      var form = formOf(target);
      (form || document).querySelectorAll('input[name="run"]').forEach(function (box) {
        box.checked = target.checked;
      });
    }
  });

  // A refused save: back to the first refused field (the page marks it autofocus), its
  // sentence beside it in view, its id in the address; else to the refusal's box.
  function backToRefused() {
    var field = document.querySelector("[autofocus]");
    if (field && field.id) {
      if (history.replaceState) {
        history.replaceState(null, "", location.pathname + location.search + "#" + field.id);
      }
      field.focus({ preventScroll: true });
      (field.closest(".field") || field).scrollIntoView({ block: "center" });
      return;
    }
    var box = document.querySelector(".problems[tabindex]");
    if (box) {
      box.focus({ preventScroll: true });
      box.scrollIntoView({ block: "center" });
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("select[data-fit]").forEach(fit);
    backToRefused();
  });
})();
