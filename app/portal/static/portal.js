// The portal's one script. It opens the session with the link's one-time token (from the
// URL's fragment, which it then clears), keeps the session token in memory only -- no cookie,
// no storage: a framed page on another site may be refused both -- and sends it as a bearer
// header with every request. Each view is HTML rendered by the server, swapped into <main>.
"use strict";
(() => {
  const view = document.getElementById("view");
  const status = document.getElementById("status");
  let token = null;

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

  async function open() {
    const link = new URLSearchParams(location.hash.slice(1)).get("t");
    // The token works once; it leaves the address bar and the history now.
    history.replaceState(null, "", location.pathname);
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
    token = opened.session_token;
    document.querySelector("[data-nav]").setAttribute("aria-current", "page");
    send("GET", "/portal/api/endpoints");
  }

  open();
})();
