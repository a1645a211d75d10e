/* The "Load tests" view's only script (served from the plugin, allowed by script-src 'self').
   1. Follows Airflow's light/dark theme: the UI sets class "dark" or "light" on its <html>; the view
      runs in a same-origin iframe, so it reads that class and watches it change.
   2. On Airflow 3.1.0 the UI keeps the login token in localStorage instead of a cookie, so the iframe's
      first request arrives without credentials (401): the page is asked again once, with the token. */
(function () {
  "use strict";
  var root = document.documentElement;

  function parentRoot() {
    try {
      if (window.parent && window.parent !== window) {
        return window.parent.document.documentElement;
      }
    } catch (err) {
      /* another origin: keep the system's preference */
    }
    return null;
  }

  function followTheme() {
    var outer = parentRoot();
    if (!outer) {
      return;
    }
    if (outer.classList.contains("dark")) {
      root.setAttribute("data-theme", "dark");
    } else if (outer.classList.contains("light")) {
      root.setAttribute("data-theme", "light");
    }
  }

  followTheme();
  var outer = parentRoot();
  if (outer && window.MutationObserver) {
    new MutationObserver(followTheme).observe(outer, { attributes: true, attributeFilter: ["class"] });
  }

  function retryWithStoredToken() {
    var token = null;
    try {
      token = window.localStorage.getItem("token");
    } catch (err) {
      return;
    }
    if (!token || !window.fetch || !window.DOMParser) {
      return;
    }
    window
      .fetch(window.location.href, { headers: { Authorization: "Bearer " + token }, credentials: "same-origin" })
      .then(function (answer) {
        return answer.ok ? answer.text() : null;
      })
      .then(function (html) {
        if (!html) {
          return;
        }
        var fresh = new window.DOMParser().parseFromString(html, "text/html").getElementById("loadtest-view");
        var current = document.getElementById("loadtest-view");
        if (fresh && current) {
          current.replaceWith(document.importNode(fresh, true));
          document.body.setAttribute("data-status", "200");
        }
      })
      .catch(function () {
        /* the 401 message stays */
      });
  }

  if (document.body && document.body.getAttribute("data-status") === "401") {
    retryWithStoredToken();
  }
})();
