// A form that says data-confirm asks first: disabling an endpoint, rotating its secret,
// cancelling a delivery, redriving every match. (Listening on the document, it holds for
// content a live page swaps in too.)
document.addEventListener("submit", (event) => {
  const question = event.target.dataset && event.target.dataset.confirm;
  if (question && !window.confirm(question)) event.preventDefault();
});

// Live pages. A page whose <main> says data-live="N" reads itself again N seconds after its
// last reading ended (one request at a time, so a slow server gets no pile of them, and an
// old answer never lands after a newer one) while it is in view, and swaps in its new
// <main>. It waits while the reader has text selected or a control focused on the page, keeps
// trying through errors (saying so), and stops, saying so, when the session has ended or the
// new page no longer asks to be followed (a delivery that finished). Without JavaScript the
// pages are the same, only still.
(() => {
  const main = document.querySelector("main[data-live]");
  if (!main) return;
  const every = Number(main.dataset.live) * 1000;
  const note = document.createElement("p");
  note.className = "live-note";
  note.setAttribute("role", "status");
  main.before(note);
  const say = (text) => { note.textContent = text; note.hidden = !text; };
  say("");

  const busy = () =>
    !document.getSelection().isCollapsed ||
    (document.activeElement !== document.body && main.contains(document.activeElement));

  // "again": read again after `every`; "stop": this page follows no more.
  async function follow() {
    if (document.visibilityState !== "visible" || busy()) return "again";
    let answer;
    try {
      answer = await fetch(location.href, { cache: "no-store", redirect: "manual" });
    } catch {
      say("Not updating: the console did not answer. Trying again.");
      return "again";
    }
    if (answer.type === "opaqueredirect" || [401, 403, 404].includes(answer.status)) {
      say("This page no longer updates itself (signed out?): reload it.");
      return "stop";
    }
    if (!answer.ok) {
      say(`Not updating: the console answered ${answer.status}. Trying again.`);
      return "again";
    }
    const fresh = new DOMParser().parseFromString(await answer.text(), "text/html");
    const next = fresh.querySelector("main");
    if (!next || next.dataset.viewing !== main.dataset.viewing) {
      location.reload(); // another tenant picked in another tab: the whole page changes
      return "stop";
    }
    if (busy()) return "again"; // the reader started something while we were reading
    main.replaceChildren(...next.childNodes);
    say("");
    return next.hasAttribute("data-live") ? "again" : "stop";
  }

  const loop = async () => {
    if ((await follow()) === "again") setTimeout(loop, every);
  };
  setTimeout(loop, every);
})();
