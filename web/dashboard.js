// wakegate admin dashboard: homes and apps tables kept live from the
// admin event stream (/admin/events), read with fetch so that the bearer
// token travels in a header, never in a URL. The token lives in this tab's
// sessionStorage only.
"use strict";
(function () {
  var KEY = "wakegate.admin.token";
  var $ = function (id) { return document.getElementById(id); };
  var token = sessionStorage.getItem(KEY) || "";
  var homes = {}, busyApps = {}, lastSeq = 0, stream = null, refreshTimer = 0, pollTimer = 0;
  var detailId = "", logStream = null;
  // The homes table shows one page of the API's list: cursor is the page's
  // cursor, back the cursors of the pages before it.
  var PAGE = 50, pager = {cursor: "", back: [], next: ""}, filterTimer = 0, armed = {};
  var alertTypes = {"wake.failed": 1, "home.failed": 1, "roll.rolled_back": 1, "roll.incident": 1};
  // An event changes a home's row at once. An answer from the API asked
  // for before that event (a page of homes, an action's result) is older
  // than what the row shows, and is not applied to that home: evGen counts
  // the events applied to homes, touched holds the count at each home's
  // latest, and a request keeps the count at its start.
  var evGen = 0, touched = {};
  function current(id, gen) { return !(touched[id] > gen); }

  function api(method, path, body) {
    var opts = {method: method, headers: {"Authorization": "Bearer " + token, "Accept": "application/json"}, cache: "no-store"};
    if (body !== undefined) { opts.headers["Content-Type"] = "application/json"; opts.body = JSON.stringify(body); }
    return fetch(path, opts).then(function (r) {
      if (r.status === 401) { logout("The token was refused."); throw new Error("unauthorized"); }
      return r.text().then(function (t) {
        var v = t ? JSON.parse(t) : {};
        if (!r.ok) { var err = new Error(failure(r, v)); err.status = r.status; throw err; }
        return v;
      });
    });
  }

  // failure says what went wrong for the operator: the admin error's
  // message, cause and hint, or (an app whose wait ran out) its phase.
  function failure(r, v) {
    var e = v.error;
    if (!e) { return r.status + " " + r.statusText + (v.phase ? ": the app is " + v.phase + (v.operation ? " (" + v.operation + ")" : "") : ""); }
    return [e.message || r.statusText, e.cause, e.hint ? "hint: " + e.hint : ""].filter(Boolean).join(" — ");
  }

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) { e.setAttribute(k, attrs[k]); }
    if (text !== undefined) { e.textContent = text; }
    return e;
  }
  function pill(s) { return el("span", {"class": "pill " + s}, s); }
  function clock(iso) {
    var d = new Date(iso);
    return isNaN(d) ? "" : d.toLocaleTimeString([], {hour: "2-digit", minute: "2-digit", second: "2-digit"});
  }
  function secs(ms) { return ms >= 1000 ? (ms / 1000).toFixed(1) + " s" : Math.round(ms) + " ms"; }

  function renderHome(h) {
    var tbody = $("homes").tBodies[0];
    var tr = tbody.querySelector('tr[data-home="' + CSS.escape(h.id) + '"]');
    if (!tr) {
      tr = el("tr", {"data-home": h.id});
      ["id", "target", "status", "sessions", "version", "last-wake", "idle", "actions"].forEach(function (c) { tr.appendChild(el("td", {"class": c})); });
      ["wake", "suspend", "roll", "refresh"].forEach(function (a) {
        var b = el("button", {"type": "button", "data-action": a, "data-home": h.id,
          "aria-label": a[0].toUpperCase() + a.slice(1) + " home " + h.id}, a[0].toUpperCase() + a.slice(1));
        b.addEventListener("click", function () { confirmThen(a, h.id, b); });
        tr.querySelector(".actions").appendChild(b);
        tr.querySelector(".actions").appendChild(document.createTextNode(" "));
      });
      tbody.appendChild(tr);
    }
    var open = el("button", {"type": "button", "class": "link", "data-detail": h.id, "aria-label": "Open details of home " + h.id}, h.id);
    open.addEventListener("click", function () { openDetail(h.id); });
    tr.querySelector(".id").replaceChildren(open);
    tr.querySelector(".target").textContent = "/node/" + h.target;
    var st = h.wake ? "waking" : h.status;
    tr.querySelector(".status").replaceChildren(pill(st));
    tr.querySelector(".sessions").textContent = h.sessions;
    tr.querySelector(".version").textContent = h.version || "–";
    tr.querySelector(".last-wake").textContent = h.last_wake_at ? clock(h.last_wake_at) + " (" + secs(h.last_wake_latency_ms) + ")" : "never";
    tr.querySelector(".idle").textContent = h.idle_timeout === "0s" ? "never" :
      (h.suspend_in_s !== undefined ? "in " + Math.round(h.suspend_in_s) + " s" : "–");
  }

  function renderHomes(list, gen) {
    var seen = {};
    list.forEach(function (h) {
      if (!current(h.id, gen) && homes[h.id]) { h = homes[h.id]; }
      homes[h.id] = h; seen[h.id] = 1; renderHome(h);
    });
    $("homes").tBodies[0].querySelectorAll("tr").forEach(function (tr) {
      if (!seen[tr.getAttribute("data-home")]) { delete homes[tr.getAttribute("data-home")]; tr.remove(); }
    });
  }

  // renderApp updates the app's row in place (created on first sight), so
  // that its buttons stay the same nodes across refreshes.
  function renderApp(tbody, a) {
    var tr = tbody.querySelector('tr[data-app="' + CSS.escape(a.slug) + '"]');
    if (!tr) {
      tr = el("tr", {"data-app": a.slug});
      ["slug", "kind", "runs-on", "phase", "open", "actions"].forEach(function (c) { tr.appendChild(el("td", {"class": c})); });
      // Restart is stop then start of the app's home: apps in a home only.
      (a.home ? ["start", "stop", "restart"] : ["start", "stop"]).forEach(function (op) {
        var b = el("button", {"type": "button", "data-app-action": op, "data-app": a.slug}, op[0].toUpperCase() + op.slice(1));
        b.addEventListener("click", function () { appAct(op, a.slug); });
        tr.querySelector(".actions").appendChild(b);
        tr.querySelector(".actions").appendChild(document.createTextNode(" "));
      });
      tbody.appendChild(tr);
    }
    tr.querySelector(".slug").replaceChildren(el("code", {}, "/apps/" + a.slug + "/"));
    tr.querySelector(".kind").textContent = a.kind;
    tr.querySelector(".runs-on").textContent = a.home ? "home " + a.home : (a.upstream || "");
    var phase = tr.querySelector(".phase");
    phase.replaceChildren(a.phase ? pill(a.phase) : el("span", {"class": "muted"}, "–"));
    if (a.operation) { phase.appendChild(el("span", {"class": "muted"}, " " + a.operation)); }
    var href = appHref(a.url);
    tr.querySelector(".open").replaceChildren(href ? el("a", {"href": href, "target": "_blank", "rel": "noopener noreferrer",
      "data-open-app": a.slug, "aria-label": "Open app " + a.slug + " in a new tab"}, "Open") : el("span", {"class": "muted"}, "–"));
    tr.querySelectorAll("button").forEach(function (b) { b.disabled = !!busyApps[a.slug]; });
  }

  function renderApps(list) {
    var tbody = $("apps").tBodies[0], seen = {};
    var none = tbody.querySelector("tr.none");
    if (none) { none.remove(); }
    list.forEach(function (a) { seen[a.slug] = 1; renderApp(tbody, a); });
    tbody.querySelectorAll("tr[data-app]").forEach(function (tr) {
      if (!seen[tr.getAttribute("data-app")]) { tr.remove(); }
    });
    if (!list.length) {
      tbody.appendChild(el("tr", {"class": "none"})).appendChild(el("td", {"colspan": 6, "class": "muted"},
        $("app-phase").value ? "No app is " + $("app-phase").value + "." : "No apps."));
    }
  }

  // appHref is the app's public URL; one without a host ("http://:8080/…",
  // a listener on every address) gets the host this page was opened at.
  function appHref(url) {
    if (!url) { return ""; }
    var m = /^(https?:)\/\/(:\d+)?(\/.*)$/.exec(url);
    if (m) { return m[1] + "//" + location.hostname + (m[2] || "") + m[3]; }
    return /^https?:\/\//.test(url) ? url : "";
  }

  // optional reads a view the gateway may not have (certificates without
  // TLS): null on 404.
  function optional(path) {
    return api("GET", path).catch(function (e) { if (e.status === 404) { return null; } throw e; });
  }

  function fillRows(table, rows) {
    table.tBodies[0].replaceChildren.apply(table.tBodies[0], rows.map(function (cells) {
      var tr = el("tr");
      cells.forEach(function (c) { tr.appendChild(c instanceof Node ? el("td").appendChild(c).parentNode : el("td", {}, String(c))); });
      return tr;
    }));
  }

  function renderDenials(d) {
    var counts = (d.counts || []).map(function (c) { return c.count + " × " + c.policy + "/" + c.code; });
    $("denial-counts").textContent = counts.length ? "Since start: " + counts.join(", ") + "." : "No request refused since start.";
    fillRows($("denials"), (d.recent || []).slice(0, 20).map(function (x) {
      return [clock(x.at), x.route, x.policy, x.status, x.code, x.reason, x.client, x.request_id];
    }));
  }

  function renderFleet(f) {
    $("fleet-card").hidden = !f || !f.fleet;
    if (!f || !f.fleet) { return; }
    fillRows($("fleet"), f.instances.map(function (i) {
      return [i.instance, secs(i.heartbeat_age_s * 1000) + " ago", i.sessions, i.version || "–", i.run || "–"];
    }));
  }

  function renderCerts(c) {
    $("certs-card").hidden = !c || c.mode === "off";
    if (!c || c.mode === "off") { return; }
    $("certs-mode").textContent = "(" + c.mode + ")";
    fillRows($("certs"), (c.certificates || []).map(function (x) {
      return [x.name, pill(x.status), x.not_after ? new Date(x.not_after).toLocaleString() : "–", x.issuer || "–",
        (x.last_event || "–") + (x.last_error ? ": " + x.last_error : "")];
    }));
  }

  // loadExtras refreshes the views below the tables: denials, fleet and
  // certificates.
  function loadExtras() {
    return Promise.all([optional("/admin/access/denials").then(function (d) { if (d) { renderDenials(d); } }),
      optional("/admin/fleet").then(renderFleet), optional("/admin/certificates").then(renderCerts)]);
  }

  // appAct runs an app operation; the answer comes once the app is ready
  // (stopped for stop), and meanwhile the app's buttons stay disabled.
  function appAct(op, slug) {
    busyApps[slug] = 1;
    $("action-error").textContent = "";
    document.querySelectorAll('button[data-app="' + CSS.escape(slug) + '"]').forEach(function (b) { b.disabled = true; });
    api("POST", "/admin/apps/" + encodeURIComponent(slug) + "/" + op)
      .catch(function (e) { $("action-error").textContent = op + " " + slug + ": " + e.message; })
      .finally(function () { delete busyApps[slug]; refreshSoon(); });
  }

  function refresh() {
    return api("GET", "/admin/status").then(function (s) {
      $("instance").textContent = s.instance + " · " + s.version + " · up " + Math.round(s.uptime_s) + " s" + (s.draining ? " · draining" : "");
      $("n-homes").textContent = s.counts.homes;
      $("n-running").textContent = s.counts.homes_running;
      $("n-apps").textContent = s.counts.apps;
      $("n-sessions").textContent = s.counts.sessions;
      $("health").textContent = s.healthy ? "ok" : "problems";
      return api("GET", "/admin/apps" + ($("app-phase").value ? "?phase=" + encodeURIComponent($("app-phase").value) : ""));
    }).then(function (a) {
      renderApps(a.apps || []);
      return Promise.all([loadHomes(), loadExtras()]);
    }).catch(function (e) { $("action-error").textContent = e.message; });
  }

  // loadHomes shows the current page of homes matching the filters. Only
  // the answer to the latest request is shown: an earlier one (a refresh
  // sent before the filters changed) may arrive after it.
  var homesSeq = 0;
  function loadHomes() {
    var seq = ++homesSeq, gen = evGen;
    var q = "?limit=" + PAGE + "&q=" + encodeURIComponent($("home-q").value.trim()) +
      "&status=" + encodeURIComponent($("home-status").value) + "&version=" + encodeURIComponent($("home-version").value.trim()) +
      (pager.cursor ? "&cursor=" + encodeURIComponent(pager.cursor) : "");
    return api("GET", "/admin/homes" + q).then(function (p) {
      if (seq !== homesSeq) { return; }
      renderHomes(p.homes, gen);
      pager.next = p.next_cursor || "";
      var first = pager.back.length * PAGE;
      $("home-count").textContent = p.total ? "homes " + (first + 1) + "–" + (first + p.homes.length) + " of " + p.total : "no home matches";
      $("home-next").disabled = !pager.next;
      $("home-prev").disabled = !pager.back.length;
    });
  }

  // filterSoon shows the first page of homes matching the changed filters,
  // once typing pauses. The page is reset at once, so that a refresh in
  // between asks for the first page too, and answers to requests sent
  // before the change are not shown.
  function filterSoon() {
    pager = {cursor: "", back: [], next: ""};
    homesSeq++;
    clearTimeout(filterTimer);
    filterTimer = setTimeout(function () { loadHomes().catch(function (e) { $("action-error").textContent = e.message; }); }, 200);
  }

  // confirmThen asks once more before a suspend or a roll: the first press
  // turns the button into a confirmation for a few seconds.
  function confirmThen(action, id, button) {
    if (action === "wake" || action === "refresh") { act(action, id, button); return; }
    var key = action + " " + id, label = action[0].toUpperCase() + action.slice(1);
    if (armed[key]) {
      clearTimeout(armed[key]); delete armed[key];
      button.textContent = label; button.setAttribute("aria-label", label + " home " + id);
      act(action, id, button);
      return;
    }
    button.textContent = "Confirm " + action;
    button.setAttribute("aria-label", "Confirm " + action + " of home " + id);
    armed[key] = setTimeout(function () {
      delete armed[key];
      button.textContent = label; button.setAttribute("aria-label", label + " home " + id);
    }, 5000);
  }
  function refreshSoon() {
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(function () { refresh(); if (detailId) { loadDetail(); } }, 150);
  }

  // openDetail shows one home: its facts, last wakes, restarts, and a live
  // tail of its log.
  function openDetail(id) {
    closeDetail();
    detailId = id;
    $("detail").hidden = false;
    $("detail-title").textContent = "Home " + id;
    $("detail-log").textContent = "";
    loadDetail();
    tailLog(id);
    $("detail").scrollIntoView();
  }

  function closeDetail() {
    detailId = "";
    if (logStream) { logStream.abort(); logStream = null; }
    $("detail").hidden = true;
  }

  function fact(dl, name, value) {
    dl.appendChild(el("dt", {}, name));
    dl.appendChild(el("dd", {}, value));
  }

  function loadDetail() {
    var id = detailId;
    api("GET", "/admin/homes/" + encodeURIComponent(id)).then(function (h) {
      if (detailId !== id) { return; }
      var dl = $("detail-facts");
      dl.replaceChildren();
      fact(dl, "Status", (h.wake ? "waking (" + h.wake.phase + ")" : h.status) + (h.reason ? ": " + h.reason : ""));
      fact(dl, "Verdict", h.verdict + (h.verdict_age_s !== undefined ? ", proven ready " + Math.round(h.verdict_age_s) + " s ago" : ""));
      var k = h.session_kinds || {requests: 0, websockets: 0, leases: []};
      fact(dl, "Sessions", k.requests + " requests, " + k.websockets + " WebSockets, " + k.leases.length + " leases" +
        k.leases.map(function (l) { return " (lease " + l.lease + " until " + clock(l.expires_at) + ")"; }).join(""));
      fact(dl, "Idle suspend", h.idle_timeout === "0s" ? "never" : (h.suspend_in_s !== undefined ? "in " + Math.round(h.suspend_in_s) + " s" : "not due"));
      var r = h.roll || {};
      fact(dl, "Version", h.version + " · roll " + (r.state || "–") + (r.target_version ? " (target " + r.target_version + ")" : "") +
        (r.bad_version ? " · bad version " + r.bad_version : ""));
      var tb = $("detail-wakes").tBodies[0];
      tb.replaceChildren();
      (h.wakes || []).forEach(function (w) {
        var tr = el("tr", {"class": "wake " + w.outcome});
        [clock(w.at), w.cause, String(w.joined), secs(w.provider_ms), secs(w.probe_ms), secs(w.total_ms),
          w.outcome + (w.error ? ": " + w.error : ""),
          w.stop_proven === undefined ? "" : (w.stop_proven ? "proven stopped" : "NOT proven stopped")].forEach(function (c) { tr.appendChild(el("td", {}, c)); });
        tb.appendChild(tr);
      });
      if (!(h.wakes || []).length) { tb.appendChild(el("tr")).appendChild(el("td", {"colspan": 8, "class": "muted"}, "No wake finished since the gateway started.")); }
      var ul = $("detail-restarts");
      ul.replaceChildren();
      (h.restarts || []).forEach(function (x) { ul.appendChild(el("li", {}, clock(x.time) + " pid " + x.old_pid + " " + x.exit_reason + ": " + x.outcome)); });
      if (!(h.restarts || []).length) { ul.appendChild(el("li", {"class": "muted"}, "None.")); }
    }).catch(function (e) { $("action-error").textContent = "details of " + id + ": " + e.message; });
  }

  // requestLine matches a line of an HTTP access log ("GET / HTTP/1.1"
  // 200): most of them are the gateway's own checks of the home, which
  // would bury what the home itself wrote.
  var requestLine = /\b(GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS) \S+ HTTP\/\d(\.\d)?\b/;

  // logLine is one line of the log tail, marked when it is a request line.
  function logLine(text) {
    return el("span", requestLine.test(text) ? {"class": "request"} : {}, text + "\n");
  }

  $("detail-log-requests").addEventListener("change", function (e) {
    $("detail-log").classList.toggle("hide-requests", !e.target.checked);
  });

  // tailLog follows the home's log (the last 100 lines, then each new one).
  function tailLog(id) {
    var ctrl = new AbortController();
    logStream = ctrl;
    var pre = $("detail-log");
    fetch("/admin/homes/" + encodeURIComponent(id) + "/logs?lines=100&follow=1",
      {headers: {"Authorization": "Bearer " + token, "Accept": "text/event-stream"}, signal: ctrl.signal, cache: "no-store"}).then(function (r) {
      if (!r.ok || !r.body) {
        return r.text().then(function (t) {
          var v = {}; try { v = JSON.parse(t); } catch (e) { /* not JSON */ }
          $("detail-log-state").textContent = failure(r, v);
        });
      }
      $("detail-log-state").textContent = "live";
      var reader = r.body.getReader(), dec = new TextDecoder(), buf = "";
      function pump() {
        return reader.read().then(function (res) {
          if (res.done) { $("detail-log-state").textContent = "ended"; return; }
          buf += dec.decode(res.value, {stream: true});
          var i;
          while ((i = buf.indexOf("\n\n")) >= 0) {
            var block = buf.slice(0, i); buf = buf.slice(i + 2);
            if (block.indexOf("event: line") !== 0) { continue; }
            var data = block.split("\n").filter(function (l) { return l.indexOf("data:") === 0; }).map(function (l) { return l.slice(5).trim(); })[0];
            try { pre.appendChild(logLine(JSON.parse(data))); } catch (e) { /* a bad frame is skipped */ }
            while (pre.childNodes.length > 500) { pre.firstChild.remove(); }
          }
          return pump();
        });
      }
      return pump();
    }).catch(function () { if (logStream === ctrl) { $("detail-log-state").textContent = "disconnected"; } });
  }

  function act(action, id, button) {
    button.disabled = true;
    $("action-error").textContent = "";
    var q = action === "wake" ? "?wait=false" : "", gen = evGen;
    api("POST", "/admin/homes/" + encodeURIComponent(id) + "/" + action + q)
      .then(function (h) {
        h = h && h.refresh ? h.home : h;
        if (h && h.id && current(h.id, gen)) { homes[h.id] = h; renderHome(h); }
      })
      .catch(function (e) { $("action-error").textContent = action + " " + id + ": " + e.message; })
      .finally(function () { button.disabled = false; refreshSoon(); });
  }

  // describe says what an event means, in a sentence for people; the
  // operator details (reason codes, errors) follow it.
  function describe(ev) {
    var h = "Home " + ev.home, a = "App " + ev.app, v = ev.version ? " " + ev.version : "";
    switch (ev.type) {
      case "wake.start": return h + " is waking" + (ev.cause ? " (" + ev.cause + ")" : "") + ".";
      case "wake.ready": return h + " woke up in " + secs(ev.total_ms) + " (provider " + secs(ev.provider_ms || 0) + ", probe " + secs(ev.probe_ms || 0) + ").";
      case "wake.failed": return h + " did not wake: " + (ev.message || "no reason given") +
        (ev.stop_proven === false ? " The gateway could not prove it stopped." : "");
      case "suspend": return h + " went to sleep" + (ev.message ? ": " + ev.message : ".");
      case "home.failed": return h + " failed and will not be restarted: " + (ev.message || "") ;
      case "home.refreshed": return h + ": its provider says " + ev.reason + "; " + (ev.message || "") + ".";
      case "roll.start": return h + " is moving to version" + v + ".";
      case "roll.done": return h + " now runs version" + v + ".";
      case "roll.rolled_back": return h + " went back to its prior version: version" + v + " failed" + (ev.message ? " (" + ev.message + ")" : "") + ".";
      case "roll.incident": return h + " needs attention: the roll and its rollback failed" + (ev.message ? " (" + ev.message + ")" : "") + ".";
      case "app.phase": return a + " is " + ev.phase + (ev.message ? ": " + ev.message : "") + (ev.reason ? " [" + ev.reason + "]" : "");
      case "route.published": return a + " is published: everyone reaches it.";
      case "route.unpublished": return a + " is no longer published" + (ev.reason ? " (" + ev.reason + ")" : "") + ".";
    }
    return ev.type + (ev.app ? " " + ev.app : (ev.home ? " " + ev.home : "")) + (ev.message ? ": " + ev.message : "");
  }

  // onEvent applies an event at once, then refreshes from the API.
  function onEvent(ev) {
    lastSeq = Math.max(lastSeq, ev.seq);
    var li = el("li");
    li.appendChild(el("time", {}, clock(ev.time)));
    var what = describe(ev);
    li.setAttribute("data-type", ev.type);
    li.appendChild(el("span", {}, what));
    var list = $("events");
    list.insertBefore(li, list.firstChild);
    while (list.children.length > 100) { list.lastChild.remove(); }
    if (alertTypes[ev.type]) {
      $("alerts").hidden = false;
      var a = $("alert-list");
      a.insertBefore(el("li", {}, clock(ev.time) + " " + what), a.firstChild);
      while (a.children.length > 20) { a.lastChild.remove(); }
    }
    var h = ev.home && homes[ev.home];
    if (h) {
      var changed = true;
      switch (ev.type) {
      case "wake.start": h.wake = {phase: "starting"}; break;
      case "wake.ready":
        // The API's last wake is when the wake began; the event comes at its end.
        var began = Date.parse(ev.time) - (ev.total_ms || 0);
        h.wake = null; h.status = "running"; h.last_wake_latency_ms = ev.total_ms;
        h.last_wake_at = isNaN(began) ? ev.time : new Date(began).toISOString();
        break;
      case "wake.failed": h.wake = null; h.status = "suspended"; break;
      case "suspend": h.status = "suspended"; break;
      case "home.failed": h.status = "failed"; break;
      case "home.refreshed": if (ev.phase) { h.status = ev.phase; } else { changed = false; } break;
      default: changed = false; // an app's or a roll's event: the next answer tells
      }
      if (changed) { touched[h.id] = ++evGen; renderHome(h); }
    }
    refreshSoon();
  }

  // follow reads the event stream, reconnecting with Last-Event-ID.
  function follow() {
    var ctrl = new AbortController();
    stream = ctrl;
    var headers = {"Authorization": "Bearer " + token, "Accept": "text/event-stream"};
    if (lastSeq) { headers["Last-Event-ID"] = String(lastSeq); }
    fetch("/admin/events", {headers: headers, signal: ctrl.signal, cache: "no-store"}).then(function (r) {
      if (r.status === 401) { logout("The token was refused."); return; }
      if (!r.ok || !r.body) { throw new Error("event stream: " + r.status); }
      setConn(true);
      var reader = r.body.getReader(), dec = new TextDecoder(), buf = "";
      function pump() {
        return reader.read().then(function (res) {
          if (res.done) { throw new Error("event stream closed"); }
          buf += dec.decode(res.value, {stream: true});
          var i;
          while ((i = buf.indexOf("\n\n")) >= 0) {
            var block = buf.slice(0, i); buf = buf.slice(i + 2);
            var data = block.split("\n").filter(function (l) { return l.indexOf("data:") === 0; })
              .map(function (l) { return l.slice(5).trim(); }).join("\n");
            if (data) { try { onEvent(JSON.parse(data)); } catch (e) { /* a bad frame is skipped */ } }
          }
          return pump();
        });
      }
      return pump();
    }).catch(function () {
      if (stream !== ctrl || !token) { return; }
      setConn(false);
      setTimeout(function () { if (stream === ctrl && token) { follow(); } }, 1000);
    });
  }

  function setConn(on) {
    $("conn").className = "pill " + (on ? "on" : "off");
    $("conn").textContent = on ? "live" : "reconnecting";
  }

  function start() {
    $("login").hidden = true; $("app").hidden = false; $("logout").hidden = false;
    refresh();
    follow();
    clearInterval(pollTimer);
    pollTimer = setInterval(refresh, 5000); // sessions and uptime have no events
  }

  function logout(msg) {
    closeDetail();
    token = ""; sessionStorage.removeItem(KEY);
    if (stream) { stream.abort(); stream = null; }
    clearInterval(pollTimer);
    $("app").hidden = true; $("logout").hidden = true; $("login").hidden = false;
    $("conn").className = "pill off"; $("conn").textContent = "not connected";
    $("login-error").textContent = msg || "";
  }

  $("login-form").addEventListener("submit", function (e) {
    e.preventDefault();
    token = $("token").value.trim();
    $("token").value = "";
    api("GET", "/admin/status").then(function () {
      sessionStorage.setItem(KEY, token);
      $("login-error").textContent = "";
      start();
    }).catch(function (err) { if (token) { $("login-error").textContent = err.message; } });
  });
  $("logout").addEventListener("click", function () { logout(""); });
  $("detail-close").addEventListener("click", closeDetail);
  ["home-q", "home-version"].forEach(function (id) { $(id).addEventListener("input", filterSoon); });
  $("home-status").addEventListener("change", filterSoon);
  $("app-phase").addEventListener("change", function () { refresh(); });
  $("app-filter").addEventListener("submit", function (e) { e.preventDefault(); refresh(); });
  $("home-filter").addEventListener("submit", function (e) { e.preventDefault(); filterSoon(); });
  $("home-next").addEventListener("click", function () {
    if (!pager.next) { return; }
    pager.back.push(pager.cursor); pager.cursor = pager.next; loadHomes();
  });
  $("home-prev").addEventListener("click", function () {
    if (!pager.back.length) { return; }
    pager.cursor = pager.back.pop(); loadHomes();
  });

  if (token) { start(); } else { logout(""); }
})();
