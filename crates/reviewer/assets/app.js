// Airlock review: live updates, keyboard shortcuts and in-place decisions for the
// server-rendered pages. No dependencies; every task's HTML comes escaped from the server.
(function () {
  "use strict";

  var csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";
  var list = document.getElementById("tasks");
  // The service claims the task a person opens (`--claim-on-open`).
  var claimOnOpen = document.body.dataset.claimOnOpen === "true";

  function cards() { return list ? Array.prototype.slice.call(list.querySelectorAll("article.task")) : []; }
  function selected() { return list && list.querySelector("article.task.selected"); }

  // `reveal`: the person moved on (a key, a decision), so the task is brought to where its
  // call can be read.
  function select(card, reveal) {
    var opened = card && !card.classList.contains("selected");
    cards().forEach(function (c) {
      // A task released here is claimed again only once it is opened again.
      if (c !== card) { delete c.dataset.released; }
      c.classList.remove("selected");
    });
    if (card) {
      card.classList.add("selected");
      // Scrolled to at once rather than smoothly: the next task is read the moment it is
      // selected.
      var top = card.getBoundingClientRect().top;
      var call = card.querySelector("section.call") || card;
      var unread = reveal && call.getBoundingClientRect().bottom > window.innerHeight;
      if (top < 60 || top > window.innerHeight - 80 || unread) { card.scrollIntoView({ block: "start" }); }
      if (claimOnOpen && opened) { claimOpened(card); }
    }
  }

  // How the list shows: every card in full (`cards`), one line per task but the selected one
  // (`compact`), or the selected task alone (`focus`). `v` goes to the next; the choice is
  // kept in the browser.
  var VIEWS = ["cards", "compact", "focus"];

  function setView(view) {
    if (VIEWS.indexOf(view) < 0) { view = VIEWS[0]; }
    document.body.dataset.view = view;
    try { localStorage.setItem("airlock-view", view); } catch (err) { /* private windows keep nothing */ }
    var button = document.getElementById("view");
    if (button) { button.textContent = "View: " + view; }
  }

  function nextView() {
    setView(VIEWS[(VIEWS.indexOf(document.body.dataset.view) + 1) % VIEWS.length]);
    var card = selected();
    if (card) { card.scrollIntoView({ block: "start" }); }
  }

  // The task after `card` that is still in the list, else the one before.
  function following(card) {
    var all = cards().filter(function (c) { return c === card || !c.classList.contains("leaving"); });
    var index = all.indexOf(card);
    return all[index + 1] || all[index - 1] || null;
  }

  // A task nobody holds is claimed when it is opened, or when it becomes free while open
  // (unless the person released it here); a claim refused (someone was quicker) shows who
  // holds it.
  function claimOpened(card) {
    var claim = card.querySelector(".claim[data-held=none] form.claim");
    if (!claim || card.dataset.claiming || card.dataset.released) { return; }
    card.dataset.claiming = "true";
    post(claim.action, new URLSearchParams()).then(function () {
      delete card.dataset.claiming;
      refreshClaim(card);
    });
  }

  // A card's claim shown afresh, and its decide buttons enabled or disabled to match, leaving
  // the rest of the card (a half-written explanation, the focus) as it is.
  function refreshClaim(card) {
    return fetchCard(card.dataset.id).then(function (fresh) {
      if (!fresh || !card.isConnected) { return; }
      var claim = card.querySelector(".claim");
      var freshClaim = fresh.querySelector(".claim");
      if (!claim || !freshClaim) { return; }
      claim.replaceWith(freshClaim);
      var buttons = card.querySelectorAll("form.decide .choices button");
      fresh.querySelectorAll("form.decide .choices button").forEach(function (button, i) {
        if (!buttons[i]) { return; }
        buttons[i].disabled = button.disabled;
        if (button.hasAttribute("aria-describedby")) {
          buttons[i].setAttribute("aria-describedby", button.getAttribute("aria-describedby"));
        } else {
          buttons[i].removeAttribute("aria-describedby");
        }
      });
    });
  }

  // A form's post as the script makes it: the CSRF token in the header, JSON back.
  function post(action, body) {
    return fetch(action, {
      method: "POST",
      credentials: "same-origin",
      headers: { "X-CSRF-Token": csrf, "Accept": "application/json" },
      body: body
    }).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (json) { return { status: r.status, json: json }; });
    });
  }

  // The page's figures come from the server (the pending total of the reviewer's pools);
  // the empty note follows the cards on this page.
  function refreshCount() {
    var results = document.getElementById("results");
    var n = results ? results.dataset.pending : String(cards().length);
    var count = document.getElementById("count");
    if (count) { count.textContent = n; }
    var empty = document.getElementById("empty");
    if (empty) { empty.hidden = cards().some(function (c) { return !c.classList.contains("leaving"); }); }
    document.title = "(" + n + ") Airlock review";
    if (!selected()) { select(cards()[0]); }
  }

  function remove(card) {
    if (!card) { return; }
    var wasSelected = card.classList.contains("selected");
    var next = card.nextElementSibling || card.previousElementSibling;
    card.classList.add("leaving");
    setTimeout(function () {
      card.remove();
      if (wasSelected) { select(next && next.isConnected ? next : cards()[0], true); }
      refreshCount();
    }, 250);
  }

  function byId(id) { return document.getElementById("task-" + id); }

  // The card of task `id` as the server draws it now, or null (gone, or not the reviewer's).
  function fetchCard(id) {
    return fetch("/ui/tasks/" + encodeURIComponent(id), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        var template = document.createElement("template");
        template.innerHTML = html || "";
        var card = template.content.firstElementChild;
        return card && card.dataset.id === id ? card : null;
      });
  }

  // The task a link names (`/#task-<id>`, as webhooks send): shown even when it is not on
  // this page, until it leaves the pending list.
  function linked() {
    var match = /^#task-(.+)$/.exec(window.location.hash);
    return match ? decodeURIComponent(match[1]) : null;
  }

  function showLinked() {
    var id = linked();
    if (!id || byId(id)) { return; }
    fetchCard(id).then(function (card) {
      // A task decided before its card arrived (by a standing decision, or elsewhere) is not added.
      if (!card || byId(id) || !card.querySelector("form.decide")) { return; }
      list.insertBefore(card, list.firstElementChild);
      select(card);
      refreshCount();
      tick();
    });
  }

  // A card whose task is still pending after a decision (an approval short of the count) is
  // shown afresh.
  function refreshCard(card) {
    fetchCard(card.dataset.id).then(function (fresh) {
      if (!fresh || !card.isConnected) { return; }
      if (card.classList.contains("selected")) { fresh.classList.add("selected"); }
      card.replaceWith(fresh);
      tick();
    });
  }

  // The linked task stays on the page while it is pending, even off this page's filter; once
  // decided (its removal may have come before the page listened), it leaves too.
  function dropIfDecided(card) {
    fetchCard(card.dataset.id).then(function (fresh) {
      if (!card.isConnected) { return; }
      if (!fresh || !fresh.querySelector("form.decide")) { remove(card); }
    });
  }

  // Brings the page in line with the store: the same filter, order and cursor (the URL's)
  // fetched again, only this page (never the whole list). Cards still shown keep their node,
  // so a half-written explanation and the selection survive; counts and pager are replaced.
  function merge(html) {
    var template = document.createElement("template");
    template.innerHTML = html;
    var fresh = template.content.getElementById("results");
    var results = document.getElementById("results");
    if (!fresh || !results) { return; }
    results.dataset.pending = fresh.dataset.pending;
    ["counts", "pager", "empty"].forEach(function (id) {
      var old = document.getElementById(id);
      var replacement = template.content.getElementById(id);
      if (old && replacement) { old.replaceWith(replacement); }
    });
    var wanted = Array.prototype.slice.call(template.content.querySelectorAll("#tasks > article.task"));
    var keep = {};
    wanted.forEach(function (card) { keep[card.dataset.id] = true; });
    cards().forEach(function (card) {
      if (keep[card.dataset.id]) { return; }
      if (card.dataset.id === linked()) { dropIfDecided(card); } else { remove(card); }
    });
    var previous = null;
    wanted.forEach(function (card) {
      var node = byId(card.dataset.id) || card;
      if (node.classList.contains("leaving")) { return; }
      var at = previous ? previous.nextElementSibling : list.firstElementChild;
      if (at !== node) { list.insertBefore(node, at); }
      previous = node;
    });
    refreshCount();
    tick();
  }

  // Events come in bursts (thousands of tasks at once): one refetch per burst, none running
  // twice at a time.
  var refreshing = false, again = false, timer = null;
  function refresh() {
    if (timer) { return; }
    timer = setTimeout(function () {
      timer = null;
      if (refreshing) { again = true; return; }
      refreshing = true;
      fetch("/ui/pending" + window.location.search, { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) { if (html) { merge(html); } })
        .catch(function () {})
        .then(function () {
          refreshing = false;
          if (again) { again = false; refresh(); }
        });
    }, 300);
  }

  function connect() {
    var live = document.getElementById("live");
    var source = new EventSource("/events");
    source.addEventListener("open", function () {
      live.textContent = "live";
      live.className = "live on";
      refresh();
    });
    source.addEventListener("error", function () { live.textContent = "reconnecting…"; live.className = "live off"; });
    source.addEventListener("added", refresh);
    source.addEventListener("removed", function (e) { remove(byId(e.data)); refresh(); });
    source.addEventListener("resync", refresh);
    source.addEventListener("claimed", function (e) {
      var card = byId(e.data);
      if (!card) { return; }
      refreshClaim(card).then(function () {
        if (claimOnOpen && card.classList.contains("selected")) { claimOpened(card); }
      });
    });
    // A page left for another (a filter, the next page) gives its connection back at once:
    // browsers allow a handful per host, and a kept page would hold one.
    window.addEventListener("pagehide", function () { source.close(); });
  }

  // Why the editor's text is not a call's arguments (a JSON object), or null when it is.
  function argumentsProblem(text) {
    var value;
    try { value = JSON.parse(text); } catch (err) { return "the arguments are not valid JSON (" + err.message + ")."; }
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      return "the arguments must be a JSON object, like {\"cmd\": \"ls\"}.";
    }
    return null;
  }

  function decide(form, decision) {
    var card = form.closest("article.task");
    var status = form.querySelector(".status");
    var buttons = form.querySelectorAll("button");
    // Every field of the form (a standing decision's scope, duration and pattern too); the
    // CSRF token goes in the header, and the arguments only with a modify.
    var body = new URLSearchParams(new FormData(form));
    body.delete("csrf");
    body.delete("arguments");
    body.set("decision", decision);
    if (decision === "modify") {
      var editor = form.querySelector("textarea[name=arguments]");
      var problem = argumentsProblem(editor.value);
      var error = form.querySelector(".arguments-error");
      editor.setAttribute("aria-invalid", problem ? "true" : "false");
      error.textContent = problem ? "Not sent: " + problem : "";
      if (problem) { editor.focus(); return; }
      body.set("arguments", editor.value);
    }
    buttons.forEach(function (b) { b.disabled = true; });
    // The person goes on to the next task at once; this one leaves when its answer is
    // recorded, and comes back selected, with why, when it is not.
    var wasSelected = card.classList.contains("selected");
    if (wasSelected) { select(following(card), true); }
    var back = function () { if (wasSelected && card.isConnected) { select(card, true); } };
    post(form.action, body).then(function (res) {
      if (res.status >= 200 && res.status < 300) {
        // An approval that leaves the task pending (it needs more reviewers): show it anew.
        if (res.json && res.json.state === "pending") { refreshCard(card); } else { remove(card); }
        return;
      }
      status.textContent = (res.json && res.json.error) || ("The decision failed (" + res.status + ").");
      back();
      // Another reviewer claims the task: the card shows who, and stays.
      if (res.status === 409 && res.json && res.json.claim) { refreshClaim(card); buttons.forEach(function (b) { b.disabled = false; }); return; }
      if (res.status === 409 || res.status === 404) { setTimeout(function () { remove(card); }, 1500); return; }
      buttons.forEach(function (b) { b.disabled = false; });
    }).catch(function () {
      status.textContent = "The service cannot be reached; try again.";
      back();
      buttons.forEach(function (b) { b.disabled = false; });
    });
  }

  // The card's Claim, Extend and Release buttons: the card shown afresh after, or why not.
  function claimOrRelease(form) {
    var card = form.closest("article.task");
    if (/\/release$/.test(form.action)) { card.dataset.released = "true"; } else { delete card.dataset.released; }
    form.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
    post(form.action, new URLSearchParams()).then(function (res) {
      if (res.status >= 200 && res.status < 300 || res.json.claim) { refreshClaim(card); return; }
      var status = card.querySelector("form.decide .status");
      if (status) { status.textContent = res.json.error || ("That failed (" + res.status + ")."); }
      if (res.status === 409 || res.status === 404) { setTimeout(function () { remove(card); }, 1500); }
    }).catch(function () {
      form.querySelectorAll("button").forEach(function (b) { b.disabled = false; });
    });
  }

  function duration(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) { return s + "s"; }
    if (s < 3600) { return Math.floor(s / 60) + "m " + (s % 60) + "s"; }
    return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
  }

  function tick() {
    var now = Date.now();
    document.querySelectorAll(".age[data-since]").forEach(function (el) {
      el.textContent = "received " + duration(now - Number(el.dataset.since)) + " ago";
    });
    document.querySelectorAll(".deadline[data-until]").forEach(function (el) {
      var left = Number(el.dataset.until) - now;
      el.textContent = left > 0
        ? "deadline in " + duration(left) + " (then " + el.dataset.onTimeout + ")"
        : "deadline passed (" + el.dataset.onTimeout + ")";
      el.classList.toggle("soon", left < 60000);
    });
  }

  // The filter form works without the script (a plain GET); with it, the URL keeps only the
  // fields that are set.
  function applyFilters(form) {
    var params = new URLSearchParams();
    new FormData(form).forEach(function (value, name) {
      if (value && !(name === "sort" && value === "oldest")) { params.set(name, value); }
    });
    var query = params.toString();
    window.location.assign("/" + (query ? "?" + query : ""));
  }

  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (form.id === "filters") { e.preventDefault(); applyFilters(form); return; }
    if (form.classList && form.classList.contains("claim")) { e.preventDefault(); claimOrRelease(form); return; }
    if (!form.classList || !form.classList.contains("decide")) { return; }
    e.preventDefault();
    var decision = e.submitter && e.submitter.value;
    if (decision) { decide(form, decision); }
  });

  document.addEventListener("click", function (e) {
    var card = e.target.closest && e.target.closest("article.task");
    if (card) { select(card); }
  });

  document.addEventListener("keydown", function (e) {
    if (!list || e.ctrlKey || e.metaKey || e.altKey) { return; }
    var typing = e.target && ["TEXTAREA", "INPUT", "SELECT"].indexOf(e.target.tagName) >= 0;
    if (typing) {
      if (e.key === "Escape") { e.target.blur(); }
      return;
    }
    var card = selected();
    var all = cards();
    var index = all.indexOf(card);
    if (e.key === "j" || e.key === "ArrowDown") { select(all[Math.min(all.length - 1, index + 1)], true); e.preventDefault(); return; }
    if (e.key === "k" || e.key === "ArrowUp") { select(all[Math.max(0, index - 1)], true); e.preventDefault(); return; }
    if (e.key === "v") { nextView(); e.preventDefault(); return; }
    if (!card) { return; }
    if (e.key === "x" || e.key === "/") { card.querySelector("textarea[name=explanation]").focus(); e.preventDefault(); return; }
    var button = card.querySelector('button[data-key="' + e.key.toLowerCase() + '"]');
    if (button && !button.disabled) { e.preventDefault(); decide(button.form, button.value); }
  });

  if (document.body.dataset.page === "pending" && list) {
    var saved = null;
    try { saved = localStorage.getItem("airlock-view"); } catch (err) { /* nothing kept */ }
    setView(saved);
    var viewButton = document.getElementById("view");
    if (viewButton) { viewButton.hidden = false; viewButton.addEventListener("click", nextView); }
    refreshCount();
    showLinked();
    connect();
    tick();
    setInterval(tick, 1000);
  }
})();
