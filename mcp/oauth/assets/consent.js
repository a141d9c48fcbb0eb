// The consent page's one script (no inline script: the page's policy
// forbids it). On a single-user server, approving proves the console's
// sign-in in this browser: the console keeps its key in this origin's
// storage (web/src/mcp.ts), and the form carries it with the console's
// cookie. Nothing else reads or sends it.
"use strict";
(function () {
  var form = document.getElementById("consent");
  var field = document.getElementById("console-key");
  if (!form || !field) return;
  var key = null;
  try { key = localStorage.getItem("warren-console-key"); } catch (e) { key = null; }
  var missing = document.getElementById("no-console");
  if (!key) {
    if (missing) missing.hidden = false;
    return;
  }
  field.value = key;
})();
