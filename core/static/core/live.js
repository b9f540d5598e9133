/* Live staff pages (overview, plant status): the parts marked data-live-region are fetched as
 * JSON every data-live-every seconds and swapped in place. The page itself never reloads, so a
 * half-typed form is never wiped, and when the server is away the last data stays on screen with
 * a "connection lost, retrying" note instead of the browser's error page.
 * Also keeps every <... data-since="unix seconds"> reading "12 min" as time goes by.
 *
 * One setTimeout chain (never setInterval): a slow server cannot pile requests up.
 *
 * While the page shows a job a worker is doing for it (an element data-live-pending-until=
 * "unix seconds": a BACnet discovery or browse), it checks every PENDING_MS instead, so the
 * answer shows seconds after the worker has it, not at the next minute's update; bounded, it
 * falls back to the page's own period once the job is done (the element gone) or its time is
 * past.
 */
(function () {
  "use strict";

  function duration(seconds) {
    const s = Math.max(0, Math.floor(seconds));
    if (s < 60) return s + " s";
    const m = Math.floor(s / 60);
    if (m < 60) return m + " min";
    const h = Math.floor(m / 60);
    if (h < 48) return h + " h" + (m % 60 ? " " + (m % 60) + " min" : "");
    return Math.floor(h / 24) + " days";
  }

  function updateDurations() {
    const now = Date.now() / 1000;
    document.querySelectorAll("[data-since]").forEach((el) => {
      const since = Number(el.dataset.since);
      if (Number.isFinite(since)) el.textContent = duration(now - since);
    });
  }

  const fmtTime = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" });
  // The live line as the server draws it: staff times are to the minute (tests/foundation/test_dates_one_way.py).
  const fmtMinute = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
  const root = document.querySelector("[data-live-url]");
  const status = document.getElementById("live-status");
  const stats = { polls: 0, failures: 0, lastOk: null, state: "ok", nextMs: null };
  const PENDING_MS = 2000;

  // The wait before the next update: PENDING_MS while a worker's job is pending, else everyMs.
  function nextDelay(everyMs) {
    const now = Date.now() / 1000;
    const pending = Array.from(document.querySelectorAll("[data-live-pending-until]")).some(
      (el) => Number(el.dataset.livePendingUntil) > now,
    );
    return pending ? Math.min(everyMs, PENDING_MS) : everyMs;
  }

  function schedule(everyMs) {
    stats.nextMs = nextDelay(everyMs);
    setTimeout(() => poll(everyMs), stats.nextMs);
  }

  function say(text, bad) {
    if (!status) return;
    status.textContent = text;
    status.classList.toggle("bad", bad);
    status.classList.toggle("muted", !bad);
  }

  function apply(data) {
    // Keyboard users keep their place: an element with an id that had focus inside a
    // replaced region gets it back (same id in the new HTML), instead of the page body.
    const focused = document.activeElement;
    const focusId = focused && focused.id && focused.closest("[data-live-region]") ? focused.id : null;
    for (const [id, html] of Object.entries(data.regions || {})) {
      const region = document.getElementById(id);
      // A region now showing a form to fill in (marked data-live-keep) is left alone: the
      // next update would untick its boxes. Its own form's POST reloads the page.
      if (region && region.hasAttribute("data-live-region") && !region.querySelector("[data-live-keep]")) {
        region.innerHTML = html;
      }
    }
    if (focusId && document.activeElement !== focused) {
      const again = document.getElementById(focusId);
      if (again) again.focus({ preventScroll: true });
    }
    updateDurations();
  }

  function poll(everyMs) {
    fetch(root.dataset.liveUrl, {
      cache: "no-store",
      credentials: "same-origin",
      headers: { Accept: "application/json" },
      signal: AbortSignal.timeout(Math.max(5000, Math.min(everyMs, 30000))),
    })
      .then((response) => {
        if (!response.ok) throw new Error("HTTP " + response.status);
        const type = response.headers.get("content-type") || "";
        // A login page instead of JSON: the session ended.
        if (!type.includes("application/json")) throw new Error("logged out?");
        return response.json();
      })
      .then((data) => {
        apply(data);
        stats.lastOk = Date.now();
        stats.state = "ok";
        // The same words as the line the server draws (templates: "Live · updated … · every").
        say("Live · updated " + fmtMinute.format(stats.lastOk) + " · every " + root.dataset.liveEvery + " s", false);
      })
      .catch((error) => {
        stats.failures += 1;
        stats.state = "lost";
        const since = stats.lastOk === null ? "when the page loaded" : fmtTime.format(stats.lastOk);
        say("Connection lost, retrying… showing data from " + since + " (" + String(error.message || error) + ")", true);
      })
      .finally(() => {
        stats.polls += 1;
        schedule(everyMs);
      });
  }

  updateDurations();
  setInterval(updateDurations, 10000);
  if (root) {
    const everyMs = Math.max(1, Number(root.dataset.liveEvery) || 60) * 1000;
    schedule(everyMs);
  }
  // For the browser tests and anyone curious in the console.
  window.bmsLive = stats;
})();
