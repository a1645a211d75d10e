/* The "Load tests" view's only script (served from the plugin, allowed by script-src 'self').
   1. Follows Airflow's light/dark theme: the UI sets class "dark" or "light" on its <html>; the view
      runs in a same-origin iframe, so it reads that class and watches it change.
   2. Opens links from Airflow's window: the UI's iframe sandbox allows neither top navigation nor
      popups, so a link to a task instance (target _top) or to the service's report (target _blank) is
      followed by a link the view adds to Airflow's own document and clicks there.
   3. On Airflow 3.1.0 the UI keeps the login token in localStorage instead of a cookie, so the iframe's
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

  function followFromAirflow(event) {
    if (event.defaultPrevented || event.button !== 0 || !event.target || !event.target.closest) {
      return;
    }
    var link = event.target.closest("a[href]");
    var target = link ? link.getAttribute("target") : null;
    if (!link || (target !== "_top" && target !== "_blank")) {
      return;
    }
    var outer = parentRoot();
    if (!outer) {
      return; /* not framed: the browser follows the link itself */
    }
    event.preventDefault();
    var newTab = target === "_blank" || event.ctrlKey || event.metaKey || event.shiftKey;
    var proxy = outer.ownerDocument.createElement("a");
    proxy.href = new URL(link.getAttribute("href"), document.baseURI).href;
    proxy.target = newTab ? "_blank" : "_self";
    if (newTab) {
      proxy.rel = "noopener noreferrer";
    }
    outer.ownerDocument.body.appendChild(proxy);
    proxy.click();
    proxy.remove();
  }

  document.addEventListener("click", followFromAirflow);

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
