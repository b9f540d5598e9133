// Feed explorer (emoncms's graph module is the model): pick feeds, choose or drag a time range,
// averages from /api/v1/feeds/<id>/data. One y axis per unit, dots where data is sparse, times and ticks
// in the site's zone (not the browser's), stats of the visible range, CSV at a chosen interval,
// and the whole view in the URL's hash so a link restores it.
(function () {
  "use strict";
  const TARGET_POINTS = 800;
  const SPARSE_POINTS = 100; // at most this many readings in view: every one drawn as a dot
  // "auto" intervals: round numbers of seconds (then whole days), so windows start on the hour.
  const NICE_S = [10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];
  const CALENDAR = ["daily", "weekly", "monthly"];
  const COLOURS = ["#0b5cad", "#c0262d", "#17803d", "#b36b00", "#6f42c1", "#0f8a8a", "#7a4b00", "#d63384"];
  const root = document.getElementById("explorer");
  const TZ = root.dataset.timezone || "UTC";
  const MAX_POINTS = Number(root.dataset.maxPoints) || 20000;
  const errorBox = document.getElementById("error");
  const intervalSelect = document.getElementById("interval");
  const state = { end: Date.now(), span: 86400 * 1000, loads: 0, interval: null, order: [] };

  // ---- Time in the site's zone --------------------------------------------------------------
  const fmt = (options) => new Intl.DateTimeFormat("en-GB", { timeZone: TZ, hourCycle: "h23", ...options });
  const partsFmt = fmt({ year: "numeric", month: "numeric", day: "numeric", hour: "numeric", minute: "numeric", second: "numeric" });
  const fmtFull = fmt({ weekday: "short", day: "numeric", month: "short", year: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" });
  // Dates one way, as on every staff page (core/dates.py): "Tue 1 Jul 2025 15:01[:07]".
  const whenText = (ms, seconds) => {
    const p = Object.fromEntries(fmtFull.formatToParts(ms).map((x) => [x.type, x.value]));
    return `${p.weekday} ${p.day} ${p.month} ${p.year} ${p.hour}:${p.minute}${seconds ? ":" + p.second : ""}`;
  };
  const fmtHM = fmt({ hour: "2-digit", minute: "2-digit" });
  const fmtDay = fmt({ weekday: "short", day: "numeric", month: "short" });
  const fmtMonth = fmt({ month: "short", year: "numeric" });
  const fmtYear = fmt({ year: "numeric" });

  function zoneParts(ms) {
    const out = {};
    for (const p of partsFmt.formatToParts(new Date(ms))) if (p.type !== "literal") out[p.type] = Number(p.value);
    out.hour %= 24;
    return out;
  }
  function offsetAt(ms) { // the zone's UTC offset at that instant, in ms
    const p = zoneParts(ms);
    return Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second) - Math.floor(ms / 1000) * 1000;
  }
  function zoned(y, mo, d, h = 0, mi = 0) { // wall-clock time in the site zone -> UTC ms (mo 0-based; overflow allowed)
    const wall = Date.UTC(y, mo, d, h, mi);
    const guess = wall - offsetAt(wall);
    return wall - offsetAt(guess); // second pass: right across a DST change
  }

  // Regular ticks: whole minutes/hours/days/months/years of the site's clock, about one per 90 px.
  const STEPS = [
    ["minute", 1], ["minute", 5], ["minute", 10], ["minute", 15], ["minute", 30],
    ["hour", 1], ["hour", 2], ["hour", 3], ["hour", 6], ["hour", 12],
    ["day", 1], ["day", 2], ["day", 7], ["month", 1], ["month", 2], ["month", 3], ["month", 6],
    ["year", 1], ["year", 2], ["year", 5], ["year", 10], ["year", 50],
  ];
  const UNIT_MS = { minute: 60e3, hour: 3600e3, day: 86400e3, month: 30.44 * 86400e3, year: 365.25 * 86400e3 };
  let tickUnit = "hour";

  function regularTicks(min, max, maxTicks) {
    const [unit, n] = STEPS.find(([u, k]) => (max - min) / (UNIT_MS[u] * k) <= maxTicks) || STEPS[STEPS.length - 1];
    tickUnit = unit;
    const p = zoneParts(min);
    const at = {
      minute: (k) => zoned(p.year, p.month - 1, p.day, p.hour, Math.floor(p.minute / n) * n + k * n),
      hour: (k) => zoned(p.year, p.month - 1, p.day, Math.floor(p.hour / n) * n + k * n),
      day: (k) => {
        // Align day steps on whole days since 1970 (weeks on Mondays) so they do not shift as you pan.
        const dayNo = Math.floor(Date.UTC(p.year, p.month - 1, p.day) / 86400e3);
        const first = n === 7 ? dayNo - ((dayNo + 3) % 7) : dayNo - (dayNo % n);
        const d = new Date((first + k * n) * 86400e3);
        return zoned(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
      },
      month: (k) => zoned(p.year, Math.floor((p.month - 1) / n) * n + k * n, 1),
      year: (k) => zoned(Math.floor(p.year / n) * n + k * n, 0, 1),
    }[unit];
    const ticks = [];
    for (let k = 0; k < 200; k++) {
      const t = at(k);
      if (t > max) break;
      if (t >= min && (!ticks.length || t > ticks[ticks.length - 1])) ticks.push(t);
    }
    return ticks;
  }

  function tickLabel(ms) {
    if (tickUnit === "minute" || tickUnit === "hour") {
      const p = zoneParts(ms);
      return p.hour === 0 && p.minute === 0 ? fmtDay.format(ms) : fmtHM.format(ms);
    }
    if (tickUnit === "day") return fmtDay.format(ms);
    if (tickUnit === "month") return fmtMonth.format(ms);
    return fmtYear.format(ms);
  }

  // ---- The chart ----------------------------------------------------------------------------
  const canvas = document.getElementById("chart");
  const xScale = {
    type: "linear",
    afterBuildTicks: (scale) => {
      const maxTicks = Math.max(3, Math.floor(scale.width / 90));
      scale.ticks = regularTicks(scale.min, scale.max, maxTicks).map((value) => ({ value }));
    },
    ticks: { autoSkip: false, maxRotation: 0, callback: (v) => tickLabel(v) },
  };
  const chart = new Chart(canvas, {
    type: "line",
    data: { datasets: [] },
    options: {
      animation: false, parsing: false, normalized: true, maintainAspectRatio: false,
      interaction: { mode: "nearest", axis: "x", intersect: false },
      elements: { line: { borderWidth: 1.5 } },
      scales: { x: xScale },
      plugins: {
        tooltip: {
          callbacks: {
            title: (items) => items.length ? whenText(items[0].raw.t ?? items[0].parsed.x, true) : "",
            label: (item) => `${item.dataset.label}: ${formatValue(item.parsed.y)}`,
          },
        },
      },
    },
  });

  function formatValue(v) {
    if (v === null || v === undefined || !Number.isFinite(v)) return "–";
    const abs = Math.abs(v);
    return abs >= 1000 ? v.toFixed(0) : abs >= 10 ? v.toFixed(1) : abs >= 0.1 ? v.toFixed(2) : v.toPrecision(3);
  }

  // One axis per unit, alternating left and right; grid lines from the first only.
  function yAxes(units, barUnits) {
    const scales = {};
    units.forEach((unit, i) => {
      scales[`y${i}`] = {
        // Bars start at zero (their height is the amount); lines use the values' own range.
        type: "linear", position: i % 2 ? "right" : "left", beginAtZero: barUnits.has(unit),
        title: { display: true, text: unit || "no unit" },
        grid: { drawOnChartArea: i === 0 },
      };
    });
    return scales;
  }

  // A dot for every reading whose neighbours are missing (a line needs two), and for all of
  // them when there are few: nothing posted is ever invisible.
  function pointRadii(data) {
    const shown = data.filter((p) => p.y !== null).length;
    return data.map((p, i) => {
      if (p.y === null) return 0;
      if (shown <= SPARSE_POINTS) return 2.5;
      const before = i > 0 ? data[i - 1].y : null;
      const after = i < data.length - 1 ? data[i + 1].y : null;
      return before === null && after === null ? 2.5 : 0;
    });
  }

  // ---- Selection and the request --------------------------------------------------------------
  // The chosen feeds in the order they were chosen (colours and axes stay put as more are added).
  function selectedFeeds() {
    const checked = new Map(Array.from(document.querySelectorAll("#feed-list input:checked")).map((el) => [el.value, el]));
    state.order = state.order.filter((id) => checked.has(id));
    for (const id of checked.keys()) if (!state.order.includes(id)) state.order.push(id);
    return state.order.map((id) => checked.get(id)).map((el) => ({
      id: el.value, interval: Number(el.dataset.interval), unit: el.dataset.unit, name: el.dataset.name,
    }));
  }

  function autoInterval(spanS, finest) {
    const wanted = Math.max(finest, spanS / TARGET_POINTS);
    let s = NICE_S.find((n) => n >= wanted) || Math.ceil(wanted / 86400) * 86400;
    if (s % finest) s = Math.ceil(s / finest) * finest;
    return s;
  }

  function requestParams(feeds) {
    const start = Math.floor((state.end - state.span) / 1000);
    const end = Math.floor(state.end / 1000);
    const choice = intervalSelect.value;
    let interval = choice;
    if (choice === "auto") interval = autoInterval(end - start, Math.max(1, ...feeds.map((f) => f.interval)));
    else if (!CALENDAR.includes(choice)) interval = Number(choice);
    return { start, end, interval };
  }

  function windowMs(data, i, p) { // how long the i-th window lasts (calendar windows vary)
    if (typeof p.interval === "number") return p.interval * 1000;
    const t = (k) => data[k].t ?? data[k].x;
    if (i + 1 < data.length) return t(i + 1) - t(i);
    return i > 0 ? t(i) - t(i - 1) : 86400e3;
  }

  // Min, max, mean of the values in view; total energy in kWh for W (the integral) and kWh
  // (the bars' sum, or the meter's rise) feeds. Only the visible range counts, and nothing after
  // now: each window is clipped to [start, min(end, now)], so a daily or yearly window that
  // reaches outside the view adds only its part inside (else the total grew with the
  // interval). Lines are measured on the auto interval's fine windows (statsData), so the same
  // range gives the same figures whatever interval is drawn.
  function stats(feed, data, p, bars) {
    const from = p.start * 1000;
    const to = Math.min(p.end * 1000, Date.now());
    const inView = [];
    data.forEach((d, i) => {
      if (d.y === null) return;
      const t = d.t ?? d.x;
      const w = windowMs(data, i, p);
      const overlap = Math.min(t + w, to) - Math.max(t, from);
      if (overlap > 0) inView.push({ y: d.y, ms: overlap });
    });
    if (!inView.length) return { points: 0 };
    const ys = inView.map((d) => d.y);
    const out = {
      points: ys.length, min: Math.min(...ys), max: Math.max(...ys),
      mean: ys.reduce((a, b) => a + b, 0) / ys.length, total: null,
    };
    const unit = (feed.unit || "").toLowerCase();
    if (unit === "w" || unit === "kw") {
      const wh = inView.reduce((sum, d) => sum + d.y * d.ms / 3600e3, 0);
      out.total = `${formatValue(unit === "w" ? wh / 1000 : wh)} kWh`;
    } else if (unit === "kwh") {
      out.total = `${formatValue(bars ? ys.reduce((a, b) => a + b, 0) : ys[ys.length - 1] - ys[0])} kWh`;
    }
    return out;
  }

  // The windows the stats of a line are measured on: the auto interval's for this range (what
  // is drawn when it is that interval already, else fetched once more).
  async function statsData(feed, p, drawn, bars) {
    if (bars) return { data: drawn, p };
    const fine = { ...p, interval: autoInterval(p.end - p.start, feed.interval) };
    if (p.interval === fine.interval) return { data: drawn, p };
    const body = await fetchFeed(feed, fine, false);
    return { data: body.map(([t, y]) => ({ x: t, y, t })), p: fine };
  }

  function showStats(rows) {
    const table = document.getElementById("stats");
    const body = table.querySelector("tbody");
    body.replaceChildren();
    for (const { feed, s, colour } of rows) {
      const tr = document.createElement("tr");
      tr.dataset.feed = feed.id;
      const unit = feed.unit ? ` ${feed.unit}` : "";
      const cells = s.points
        ? [feed.name, formatValue(s.min) + unit, formatValue(s.max) + unit, formatValue(s.mean) + unit, s.total || "–", String(s.points)]
        : [feed.name, "–", "–", "–", "–", "0"];
      cells.forEach((text, i) => {
        const td = document.createElement("td");
        td.textContent = text;
        if (i === 0) td.style.borderLeft = `4px solid ${colour}`;
        else td.dataset.stat = ["", "min", "max", "mean", "total", "points"][i];
        tr.appendChild(td);
      });
      body.appendChild(tr);
    }
    table.hidden = rows.length === 0;
  }

  // ---- The view in the URL ----------------------------------------------------------------
  function viewHash(feeds, p) {
    const q = new URLSearchParams({ feeds: feeds.map((f) => f.id).join(","), start: p.start, end: p.end, interval: intervalSelect.value });
    return "#" + q.toString();
  }

  function restoreFromHash() {
    const q = new URLSearchParams(location.hash.slice(1));
    const start = Number(q.get("start"));
    const end = Number(q.get("end"));
    if (Number.isFinite(start) && Number.isFinite(end) && end > start && start >= 0) {
      state.end = end * 1000;
      state.span = (end - start) * 1000;
    }
    const interval = q.get("interval");
    if (interval && Array.from(intervalSelect.options).some((o) => o.value === interval)) intervalSelect.value = interval;
    state.order = (q.get("feeds") || "").split(",").filter(Boolean);
    document.querySelectorAll("#feed-list input[type=checkbox]").forEach((el) => { el.checked = state.order.includes(el.value); });
  }

  function exportHref(feeds, p) {
    if (!feeds.length) return "#";
    const q = new URLSearchParams({ ids: feeds.map((f) => f.id).join(","), start: p.start, end: p.end });
    q.set("interval", document.getElementById("export-interval").value || p.interval);
    return `/staff/feeds/export.csv?${q}`;
  }

  async function fetchFeed(feed, p, bars) {
    // Our own API (windows aligned to the interval, delta from the window's last reading), not
    // emoncms's /feed/data.json, whose windows start at `start` (docs/FEEDS.md).
    const q = new URLSearchParams({ start: p.start, end: p.end, interval: p.interval });
    q.set(bars ? "delta" : "average", "1");
    const response = await fetch(`/api/v1/feeds/${feed.id}/data?${q}`, { credentials: "same-origin" });
    const body = await response.json();
    if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
    return body.data;
  }

  async function load() {
    const loadNo = ++state.loads;
    const feeds = selectedFeeds();
    const p = requestParams(feeds.length ? feeds : [{ interval: 10 }]);
    state.interval = p.interval;
    const every = typeof p.interval === "number" ? `${p.interval} s` : p.interval;
    document.getElementById("range-label").textContent =
      `${whenText(p.start * 1000)} – ${whenText(p.end * 1000)} (${TZ}) · ${every} intervals`;
    document.getElementById("export").href = exportHref(feeds, p);
    const hash = viewHash(feeds, p);
    history.replaceState(null, "", hash);
    document.getElementById("share").href = hash;
    errorBox.textContent = "";
    if (typeof p.interval === "number" && (p.end - p.start) / p.interval > MAX_POINTS) {
      errorBox.textContent = `${every} over this range is more than ${MAX_POINTS} points: choose a longer interval.`;
      window.bmsExplorer.loaded = loadNo;
      return;
    }
    const units = [...new Set(feeds.map((f) => f.unit))];
    const results = await Promise.all(feeds.map(async (feed, i) => {
      const bars = CALENDAR.includes(p.interval) && feed.unit.toLowerCase() === "kwh";
      try {
        const body = await fetchFeed(feed, p, bars);
        const drawn = body.map(([t, y]) => ({ x: t, y, t }));
        return { feed, i, bars, body, measured: await statsData(feed, p, drawn, bars) };
      } catch (err) {
        return { feed, i, error: err.message };
      }
    }));
    if (loadNo !== state.loads) return; // a newer view was asked for meanwhile
    const datasets = [];
    const barUnits = new Set(results.filter((r) => r.bars).map((r) => r.feed.unit));
    const statRows = [];
    const errors = [];
    for (const { feed, i, bars, body, measured, error } of results) {
      if (error) { errors.push(`${feed.name}: ${error}`); continue; }
      const colour = COLOURS[i % COLOURS.length];
      let data = body.map(([t, y]) => ({ x: t, y, t }));
      if (bars) { // a bar covers its day: drawn at the window's middle
        data = data.map((d, k) => ({ ...d, x: d.t + windowMs(data, k, p) / 2 }));
      }
      datasets.push({
        type: bars ? "bar" : "line",
        label: feed.unit ? `${feed.name} (${feed.unit})` : feed.name,
        feedId: feed.id,
        data,
        yAxisID: `y${units.indexOf(feed.unit)}`,
        borderColor: colour, backgroundColor: bars ? colour + "99" : colour,
        spanGaps: false,
        pointRadius: bars ? 0 : pointRadii(data),
        pointHoverRadius: 4,
        barPercentage: 0.9, categoryPercentage: 1,
      });
      statRows.push({ feed, colour, s: bars ? stats(feed, data, p, true) : stats(feed, measured.data, measured.p, false) });
    }
    errorBox.textContent = errors.join(" · ");
    chart.data.datasets = datasets;
    chart.options.scales = { x: { ...xScale, min: p.start * 1000, max: p.end * 1000 }, ...yAxes(units, barUnits) };
    chart.update("none");
    showStats(statRows);
    window.bmsExplorer.loaded = loadNo;
  }

  // ---- Controls -------------------------------------------------------------------------------
  const now = () => Date.now();
  document.querySelectorAll("[data-span]").forEach((button) =>
    button.addEventListener("click", () => { state.span = Number(button.dataset.span) * 1000; state.end = now(); load(); }));
  document.getElementById("zoom-in").addEventListener("click", () => { state.end -= state.span / 4; state.span /= 2; load(); });
  document.getElementById("zoom-out").addEventListener("click", () => { state.end = Math.min(now(), state.end + state.span / 2); state.span *= 2; load(); });
  document.getElementById("pan-left").addEventListener("click", () => { state.end -= state.span / 2; load(); });
  document.getElementById("pan-right").addEventListener("click", () => { state.end = Math.min(now(), state.end + state.span / 2); load(); });
  document.getElementById("feed-list").addEventListener("change", (e) => { if (e.target.type === "checkbox") load(); });
  intervalSelect.addEventListener("change", load);
  document.getElementById("export-interval").addEventListener("change", () =>
    { document.getElementById("export").href = exportHref(selectedFeeds(), requestParams(selectedFeeds().length ? selectedFeeds() : [{ interval: 10 }])); });

  // Export by dates: the ticked feeds go with the form; the server reads the dates in the site's
  // zone, both days included (staff/export.py).
  document.getElementById("export-days").addEventListener("submit", (e) => {
    const feeds = selectedFeeds();
    if (!feeds.length) {
      e.preventDefault();
      errorBox.textContent = "Tick at least one feed to export.";
      return;
    }
    errorBox.textContent = "";
    document.getElementById("export-ids").value = feeds.map((f) => f.id).join(",");
  });

  // Search: every word must appear in the feed's name, tag or unit; empty groups hide.
  const search = document.getElementById("feed-search");
  search.addEventListener("input", () => {
    const words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
    let any = false;
    document.querySelectorAll("#feed-list .feed-group").forEach((group) => {
      let visible = 0;
      group.querySelectorAll("label").forEach((label) => {
        const match = words.every((w) => label.dataset.search.includes(w));
        label.hidden = !match;
        if (match) visible++;
      });
      group.hidden = visible === 0;
      any = any || visible > 0;
    });
    document.getElementById("feed-none").hidden = any || !document.querySelector("#feed-list .feed-group");
  });

  // Drag to zoom, with the selection drawn as a box while dragging (mouse, pen or finger).
  const dragBox = document.getElementById("drag-box");
  let dragFrom = null;
  const clampX = (x) => Math.min(chart.chartArea.right, Math.max(chart.chartArea.left, x));
  canvas.addEventListener("pointerdown", (e) => {
    const a = chart.chartArea;
    if (e.button !== 0 || e.offsetX < a.left || e.offsetX > a.right || e.offsetY < a.top || e.offsetY > a.bottom) return;
    dragFrom = e.offsetX;
    canvas.setPointerCapture(e.pointerId);
  });
  canvas.addEventListener("pointermove", (e) => {
    if (dragFrom === null) return;
    const x = clampX(e.offsetX);
    const a = chart.chartArea;
    Object.assign(dragBox.style, {
      left: `${Math.min(dragFrom, x)}px`, width: `${Math.abs(x - dragFrom)}px`,
      top: `${a.top}px`, height: `${a.bottom - a.top}px`,
    });
    dragBox.hidden = false;
  });
  function endDrag(e, zoom) {
    if (dragFrom === null) return;
    const x = clampX(e.offsetX);
    const from = dragFrom;
    dragFrom = null;
    dragBox.hidden = true;
    if (!zoom || Math.abs(x - from) < 5) return;
    const a = chart.scales.x.getValueForPixel(Math.min(from, x));
    const b = chart.scales.x.getValueForPixel(Math.max(from, x));
    if (b - a >= 60 * 1000) { state.end = b; state.span = b - a; load(); }
  }
  canvas.addEventListener("pointerup", (e) => endDrag(e, true));
  canvas.addEventListener("pointercancel", (e) => endDrag(e, false));

  window.bmsExplorer = { chart, state, loaded: 0, timeZone: TZ };
  window.addEventListener("hashchange", () => { restoreFromHash(); load(); });
  restoreFromHash();
  load();
})();
