/* Plant schematic: clicking (or Enter on) an element shows its "why" and recent commands in the
 * side panel. The details come with each live update (hidden in the live region, core/live.js),
 * so an open panel is refreshed in place when the region is swapped. */
(function () {
  "use strict";
  const live = document.getElementById("live");
  const body = document.getElementById("why-body");
  const hint = document.getElementById("why-hint");
  let shown = null;

  function show(key) {
    const detail = document.getElementById("why-" + key);
    if (!detail) return;
    shown = key;
    body.innerHTML = detail.innerHTML;
    body.dataset.element = key;
    hint.hidden = true;
    live.querySelectorAll(".el.selected").forEach((el) => el.classList.remove("selected"));
    const el = document.getElementById("el-" + key);
    if (el) el.classList.add("selected");
  }

  live.addEventListener("click", (e) => {
    const el = e.target.closest("[data-element]");
    if (el) show(el.dataset.element);
  });
  live.addEventListener("keydown", (e) => {
    const el = e.target.closest("[data-element]");
    if (el && (e.key === "Enter" || e.key === " ")) { e.preventDefault(); show(el.dataset.element); }
  });
  new MutationObserver(() => { if (shown) show(shown); }).observe(live, { childList: true });
})();
