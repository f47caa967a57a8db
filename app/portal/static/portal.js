// The portal's one script. It opens the session with the link's one-time token (from the
// URL's fragment, which it then clears), keeps the session token in memory and where a reload
// finds it again -- this tab's sessionStorage, or, in a frame refused storage (third-party
// storage blocked), the frame's own URL fragment, which no server and no host page sees --
// never in a cookie, and sends it as a bearer header with every request. Each view is HTML rendered by the server, swapped into <main>. The host
// page hears of the portal's height, each view shown and the session's end by postMessage
// (docs/portal.md, "Embedding"), sent only to the origins the tenant allows to frame it.
"use strict";
(() => {
  const view = document.getElementById("view");
  const status = document.getElementById("status");
  const hosts = (document.body.dataset.hostOrigins || "").split(" ").filter(Boolean);
  const kept = "herald-portal:" + location.pathname;
  let token = null;

  function tell(event, fields) {
    if (window.parent === window) return;
    for (const origin of hosts) {
      window.parent.postMessage({ type: "herald-portal", event, ...fields }, origin);
    }
  }

  const framed = window.parent !== window;

  function remember(session, expiresAt) {
    try {
      sessionStorage.setItem(kept, JSON.stringify({ session, expiresAt }));
      return;
    } catch {} // refused: a framed page on another site, with third-party storage blocked
    if (framed) {
      const fragment = new URLSearchParams({ s: session, e: expiresAt });
      history.replaceState(null, "", location.pathname + "#" + fragment);
    }
  }

  // The session this tab opened, unless it has expired: from storage, or from the fragment.
  function recalled(fragment) {
    let stored = { session: fragment.get("s"), expiresAt: fragment.get("e") };
    try {
      stored = JSON.parse(sessionStorage.getItem(kept) || "null") || stored;
    } catch {}
    if (stored.session && Date.parse(stored.expiresAt) > Date.now()) return stored;
    return null;
  }

  function forget() {
    try {
      sessionStorage.removeItem(kept);
    } catch {}
    history.replaceState(null, "", location.pathname);
  }

  function say(text, kind) {
    status.textContent = text;
    status.className = kind || "";
  }

  function show(html) {
    view.innerHTML = html;
    const heading = view.querySelector("h1") || view;
    heading.setAttribute("tabindex", "-1");
    heading.focus();
  }

  function ended(detail) {
    token = null;
    forget();
    tell("session-ended", { reason: detail });
    const heading = document.createElement("h1");
    heading.textContent = "Your portal session has ended";
    const why = document.createElement("p");
    why.textContent = detail;
    view.replaceChildren(heading, why);
    // The page says why; the status line would say it a second time. Focus on the heading
    // brings a screen reader to it, as a new view does.
    say("");
    heading.setAttribute("tabindex", "-1");
    heading.focus();
  }

  async function send(method, path, body) {
    const init = {
      method,
      headers: { Authorization: "Bearer " + token },
      credentials: "omit",
      cache: "no-store",
    };
    if (body) init.body = body;
    let answer;
    try {
      answer = await fetch(path, init);
    } catch {
      say("The portal could not be reached: check your connection and try again.", "error");
      return;
    }
    const type = answer.headers.get("content-type") || "";
    if (type.startsWith("text/html")) {
      show(await answer.text()); // a form refused comes back with its mistakes marked
      say("");
      tell("navigation", { view: path.replace("/portal/api", "") });
      return;
    }
    let detail = "Something went wrong (HTTP " + answer.status + ").";
    if (type.includes("json")) detail = (await answer.json()).detail || detail;
    if (answer.status === 401) ended(detail);
    else say(detail, "error");
  }

  document.addEventListener("click", (event) => {
    const link = event.target.closest("[data-get]");
    if (!link || !token) return;
    event.preventDefault();
    for (const item of document.querySelectorAll("[data-nav]")) {
      item.toggleAttribute("aria-current", item === link);
    }
    send("GET", link.dataset.get);
  });

  document.addEventListener("submit", (event) => {
    const form = event.target.closest("form[data-post]");
    if (!form || !token) return;
    event.preventDefault();
    send("POST", form.dataset.post, new URLSearchParams(new FormData(form, event.submitter)));
  });

  function start(session) {
    token = session;
    document.querySelector("[data-nav]").setAttribute("aria-current", "page");
    send("GET", "/portal/api/endpoints");
  }

  async function open() {
    new ResizeObserver(() => {
      tell("height", { height: document.documentElement.scrollHeight });
    }).observe(document.body);
    const fragment = new URLSearchParams(location.hash.slice(1));
    const link = fragment.get("t");
    // The token works once; it leaves the address bar and the history now.
    history.replaceState(null, "", location.pathname);
    const again = link ? null : recalled(fragment); // a reload: the session this tab opened
    if (again) {
      remember(again.session, again.expiresAt);
      start(again.session);
      return;
    }
    if (!link) {
      ended("This page was opened without its link: open the portal again from the page that showed it.");
      return;
    }
    let answer;
    let opened;
    try {
      answer = await fetch("/portal/api/session", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ link }),
        credentials: "omit",
        cache: "no-store",
      });
      opened = await answer.json();
    } catch {
      ended("The portal could not be opened: check your connection, then open it again.");
      return;
    }
    if (!answer.ok) {
      ended(opened.detail || "This portal link cannot be used.");
      return;
    }
    remember(opened.session_token, opened.expires_at);
    start(opened.session_token);
  }

  open();
})();
