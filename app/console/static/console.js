// A form that says data-confirm asks first: disabling an endpoint, rotating its secret,
// cancelling a delivery, redriving every match. (Listening on the document, it holds for
// content a live page swaps in too.)
document.addEventListener("submit", (event) => {
  const question = event.target.dataset && event.target.dataset.confirm;
  if (question && !window.confirm(question)) event.preventDefault();
});

// Live pages. A page whose <main> says data-live="N" reads itself again every N seconds while
// it is in view and swaps in its new content, so an overview left open, or a delivery being
// watched, stays true without a reload. The page stops following when its new version no
// longer asks to be followed (a delivery that finished) or the session has ended. Without
// JavaScript the pages are the same, only still.
(() => {
  const main = document.querySelector("main[data-live]");
  if (!main) return;
  let timer;
  async function follow() {
    if (document.visibilityState !== "visible") return;
    const answer = await fetch(location.href, { cache: "no-store" });
    if (!answer.ok || answer.redirected) return clearInterval(timer);
    const fresh = new DOMParser().parseFromString(await answer.text(), "text/html");
    const next = fresh.querySelector("main");
    if (!next) return clearInterval(timer);
    main.replaceChildren(...next.childNodes);
    if (!next.hasAttribute("data-live")) clearInterval(timer);
  }
  timer = setInterval(() => follow().catch(() => {}), Number(main.dataset.live) * 1000);
})();
