/* Kiosk display: polls data.json and updates the page in place, for weeks without a reload.
 *
 * - Every chart is created once; later polls replace its data and call update('none').
 *   No animation, parsing off, points as {x: ms, y}, a linear x axis in ms (no date adapter).
 * - One setTimeout chain for polling (never setInterval: a slow server cannot pile requests up)
 *   and one setInterval for the clock and the "how old is this" text.
 * - When the server or network drops, the last data stays on screen, the status says how old
 *   it is, and polling simply carries on until an answer comes back.
 */
(function () {
  "use strict";

  const config = JSON.parse(document.getElementById("kiosk-config").textContent);
  const tz = config.timeZone;
  const refreshMs = Math.max(50, config.refreshMs);
  // A request that hangs (half-open connection) is given up so the next poll can start.
  const timeoutMs = Math.min(Math.max(refreshMs * 2, 5000), 20000);
  const HOUR = 3600 * 1000;

  // Intl formatters are costly to build: make each once.
  const fmtHM = new Intl.DateTimeFormat("en-GB", { timeZone: tz, hour: "2-digit", minute: "2-digit" });
  const fmtHMS = new Intl.DateTimeFormat("en-GB", {
    timeZone: tz, hour: "2-digit", minute: "2-digit", second: "2-digit",
  });
  const fmtHour = new Intl.DateTimeFormat("en-GB", { timeZone: tz, hour: "numeric", hourCycle: "h23" });
  const fmtWeekday = new Intl.DateTimeFormat("en-GB", { timeZone: tz, weekday: "short" });
  const fmtDayMonth = new Intl.DateTimeFormat("en-GB", { timeZone: tz, day: "numeric", month: "short" });
  const fmtDate = new Intl.DateTimeFormat("en-GB", { timeZone: tz, day: "numeric", month: "short", year: "numeric" });
  const numberFormats = [0, 1, 2].map(
    (d) => new Intl.NumberFormat("en-GB", { minimumFractionDigits: d, maximumFractionDigits: d })
  );
  const axisFormat = new Intl.NumberFormat("en-GB", { maximumFractionDigits: 2 });

  // Unit ladders: 2400 W reads better as 2.40 kW from across a room.
  const LADDERS = {
    W: ["W", "kW", "MW", "GW"],
    kW: ["kW", "MW", "GW"],
    Wh: ["Wh", "kWh", "MWh", "GWh"],
    kWh: ["kWh", "MWh", "GWh"],
    kg: ["kg", "t", "kt"],
  };

  // How many thousands to divide by so that `magnitude` reads best in `unit`.
  function ladderStep(magnitude, unit) {
    const ladder = LADDERS[unit];
    let step = 0;
    while (ladder && Math.abs(magnitude) >= 1000 && step < ladder.length - 1) {
      magnitude /= 1000;
      step += 1;
    }
    return step;
  }

  function scale(value, unit, magnitude) {
    const step = ladderStep(magnitude === undefined ? value : magnitude, unit);
    if (!step) return [value, unit];
    return [value / Math.pow(1000, step), LADDERS[unit][step]];
  }

  // Axis labels share one unit, picked from the axis maximum: "0 kW, 2.5 kW, 5 kW".
  function formatAxis(value, unit, max) {
    const [v, u] = scale(value, unit, max);
    return axisFormat.format(v) + " " + u;
  }

  function formatNumber(value, unit) {
    if (value === 0) return "0";
    const abs = Math.abs(value);
    let digits = abs < 10 ? 2 : abs < 100 ? 1 : 0;
    if (unit === "°C" || unit === "l/s") digits = Math.min(digits, 1);
    if ((unit === "W" || unit === "Wh") && abs < 1000) digits = 0;
    return numberFormats[digits].format(value);
  }

  function formatReading(value, unit) {
    if (value === null || value === undefined) return ["–", unit || ""];
    const [v, u] = scale(value, unit);
    return [formatNumber(v, u), u];
  }

  function formatAge(ms) {
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 90) return s + " s";
    const m = Math.round(s / 60);
    if (m < 90) return m + " min";
    const h = Math.round(m / 60);
    if (h < 48) return h + " h";
    return Math.round(h / 24) + " days";
  }

  function cssVar(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  // --- charts ----------------------------------------------------------------------------------

  function hourTicks(min, max) {
    // Whole local hours divisible by 3 (4 when narrow), between min and max.
    const every = window.innerWidth < window.innerHeight ? 4 : 3;
    const ticks = [];
    for (let t = Math.ceil(min / HOUR) * HOUR; t <= max; t += HOUR) {
      if (Number(fmtHour.format(t)) % every === 0) ticks.push({ value: t });
    }
    return ticks;
  }

  function axisStyle(fontPx) {
    return {
      ticks: { color: cssVar("--muted"), font: { size: fontPx }, maxRotation: 0 },
      grid: { color: cssVar("--grid") },
      border: { color: cssVar("--grid") },
    };
  }

  function yAxis(fontPx, unitOf) {
    const style = axisStyle(fontPx);
    style.beginAtZero = true;
    style.ticks.maxTicksLimit = 5;
    style.ticks.callback = function (value) { return formatAxis(value, unitOf(), this.max); };
    return style;
  }

  function makeChart(canvas, def) {
    const box = canvas.parentElement.getBoundingClientRect();
    const fontPx = Math.round(Math.min(30, Math.max(14, box.height / 11)));
    const panel = { unit: def.unit || "" };
    const x = axisStyle(fontPx);
    x.type = "linear";
    let options;
    if (def.kind === "chart_24h") {
      x.afterBuildTicks = (axis) => { axis.ticks = hourTicks(axis.min, axis.max); };
      x.ticks.callback = (value) => fmtHM.format(value);
      options = { type: "line", data: { datasets: [] } };
    } else {
      // Daily bars sit at local noon; the axis runs midnight to midnight around them. Ticks
      // are the bars themselves: every day for a week, every 7th day back from today for 30.
      const every = def.kind === "daily_7" ? 1 : 7;
      x.grid = { display: false };
      x.offset = false;  // bar charts default to an offset that leaves empty margins here
      x.afterBuildTicks = (axis) => {
        const bars = axis.chart.data.datasets[0].data;
        const ticks = [];
        for (let i = bars.length - 1; i >= 0; i -= every) ticks.unshift({ value: bars[i].x });
        axis.ticks = ticks;
      };
      x.ticks.autoSkip = false;
      x.ticks.callback = (value) => (every === 1 ? fmtWeekday : fmtDayMonth).format(value);
      options = {
        type: "bar",
        data: {
          datasets: [{
            data: [], backgroundColor: def.colour, borderRadius: Math.round(fontPx / 4),
            barPercentage: 0.86, categoryPercentage: 0.9,
          }],
        },
      };
    }
    options.options = {
      animation: false,
      parsing: false,
      normalized: true,
      responsive: true,
      maintainAspectRatio: false,
      events: [],  // nobody hovers on a wall screen
      layout: { padding: { right: Math.round(fontPx / 2) } },
      elements: { point: { radius: 0 }, line: { borderWidth: Math.max(2, Math.round(fontPx / 7)) } },
      plugins: {
        legend: { display: false, labels: { color: cssVar("--fg"), font: { size: fontPx }, boxWidth: fontPx } },
        tooltip: { enabled: false },
      },
      scales: { x: x, y: yAxis(fontPx, () => panel.unit) },
    };
    const chart = new Chart(canvas, options);
    return { chart: chart, panel: panel };
  }

  function toPoints(rows, shift) {
    const points = new Array(rows.length);
    for (let i = 0; i < rows.length; i++) points[i] = { x: rows[i][0] + shift, y: rows[i][1] };
    return points;
  }

  function updateLineChart(state, data) {
    const chart = state.chart;
    const sets = chart.data.datasets;
    const series = data.series || [];
    while (sets.length > series.length) sets.pop();
    series.forEach((s, i) => {
      if (!sets[i]) {
        sets.push({ data: [], borderColor: s.colour, backgroundColor: s.colour + "33", fill: series.length === 1 ? "origin" : false, spanGaps: false });
      }
      sets[i].label = s.label;
      sets[i].data = toPoints(s.points, 0);
    });
    if (series.length) state.panel.unit = series[0].unit || state.panel.unit;
    chart.options.plugins.legend.display = series.length > 1;
    chart.options.scales.x.min = data.start;
    chart.options.scales.x.max = data.end;
    chart.update("none");
  }

  function updateBarChart(state, data) {
    const chart = state.chart;
    const bars = toPoints(data.bars || [], 12 * HOUR);
    chart.data.datasets[0].data = bars;
    if (bars.length) {
      chart.options.scales.x.min = bars[0].x - 12 * HOUR;
      chart.options.scales.x.max = bars[bars.length - 1].x + 12 * HOUR;
    }
    state.panel.unit = data.unit || state.panel.unit;
    chart.update("none");
  }

  // --- panels ----------------------------------------------------------------------------------

  const panels = [];

  function setReading(root, value, unit) {
    const [text, shownUnit] = formatReading(value, unit);
    const valueEl = root.querySelector(".value");
    const unitEl = root.querySelector(".unit");
    if (valueEl.textContent !== text) valueEl.textContent = text;
    if (unitEl && unitEl.textContent !== shownUnit) unitEl.textContent = shownUnit;
  }

  function setText(el, text) {
    if (el && el.textContent !== text) el.textContent = text;
  }

  function readingAge(data, t) {
    return t === null || t === undefined ? null : data.now - t;
  }

  function describeWhen(kind, data, values) {
    if (values.error) return "";
    if (kind === "live_value") {
      if (values.t === null) return "No reading yet";
      const age = readingAge(data, values.t);
      return age > 2 * 86400 * 1000 ? "Last reading " + fmtDate.format(values.t) : "Measured at " + fmtHMS.format(values.t);
    }
    if (kind === "energy_today") return "Since midnight";
    if (kind === "peak_today") return values.t === null ? "No reading today yet" : "At " + fmtHM.format(values.t);
    // Plain words for visitors: "expected", never "the model" (issue #28).
    if (kind === "building_today") {
      if (values.hours === 0) return "Since midnight: under an hour";
      const until = "Since midnight, to " + fmtHM.format(data.day_start + values.hours * HOUR);
      if (values.expected === null) return until;
      return until + " · expected by now " + formatReading(values.expected, "kWh").join(" ");
    }
    if (kind === "building_saved") {
      if (values.value === null) return "Nothing to compare with yet";
      const days = { "30d": "Last 30 days", "90d": "Last 90 days", "365d": "Last 12 months" }[values.period];
      const word = values.kwh < 0 ? " more than expected" : " less than expected";
      return days + " · " + formatReading(Math.abs(values.kwh), "kWh").join(" ") + word;
    }
    if (kind === "co2_saved") {
      const period = { today: "Today", "7d": "Last 7 days", "30d": "Last 30 days", total: "In total" }[values.period];
      return period + ", at " + Math.round(values.grid_g_per_kwh) + " g/kWh";
    }
    return "";
  }

  function updateEquivalents(list, values) {
    const items = values.equivalents || [];
    while (list.children.length > items.length) list.lastChild.remove();
    items.forEach((e, i) => {
      let li = list.children[i];
      if (!li) {
        li = document.createElement("li");
        li.append("≈ ", document.createElement("b"), " ", document.createElement("span"));
        list.append(li);
      }
      const amount = e.amount >= 100 ? numberFormats[0].format(e.amount) : numberFormats[1].format(e.amount);
      setText(li.children[0], amount);
      setText(li.children[1], e.text);
    });
  }

  // "12 % less than expected" (green) or "5 % more than expected" (red), by now.
  function updateCompare(el, values) {
    let text = "";
    let state = "";
    if (values.value !== null && values.expected) {
      const pct = Math.round((100 * (values.value - values.expected)) / values.expected);
      state = pct <= 0 ? "below" : "above";
      text = pct === 0 ? "As expected" : Math.abs(pct) + " % " + (pct < 0 ? "less" : "more") + " than expected";
    }
    setText(el, text);
    if (el.dataset.state !== state) el.dataset.state = state;
  }

  // The site energy flow: each source's power now and kWh today, the site's use, the grid.
  function updateFlow(p, values) {
    const list = p.el.querySelector(".source-list");
    const sources = values.sources || [];
    while (list.children.length > sources.length) list.lastChild.remove();
    sources.forEach((s, i) => {
      let li = list.children[i];
      if (!li) {
        li = document.createElement("li");
        li.innerHTML = '<span class="source-label"></span><span class="reading"><b class="value"></b><span class="unit"></span></span><span class="today"></span>';
        list.append(li);
      }
      setText(li.querySelector(".source-label"), s.label);
      setReading(li, s.now_w, "W");
      setText(li.querySelector(".today"), formatReading(s.today_kwh, "kWh").join(" ") + " today");
    });
    const use = p.el.querySelector(".node.use");
    setReading(use, values.use.now_w, "W");
    setText(use.querySelector(".today"), values.use.today_kwh === null ? "" :
      formatReading(values.use.today_kwh, "kWh").join(" ") + " today");
    const grid = p.el.querySelector(".node.grid");
    const g = values.grid;
    let word = "Grid";
    let state = "";
    if (g && g.now_w !== null) {
      state = g.now_w > 0.5 ? "import" : g.now_w < -0.5 ? "export" : "";
      word = state === "import" ? "Buying from the grid" : state === "export" ? "Selling to the grid" : "Grid: nothing in or out";
    }
    setText(grid.querySelector(".grid-word"), word);
    if (grid.dataset.state !== state) grid.dataset.state = state;
    setReading(grid, g && g.now_w !== null ? Math.abs(g.now_w) : null, "W");
    setText(grid.querySelector(".today"), g ? "Today in " + formatReading(g.import_today_kwh, "kWh").join(" ") +
      " · out " + formatReading(g.export_today_kwh, "kWh").join(" ") : "No grid meter");
    setText(p.el.querySelector(".own-share"), values.own_share_pct === null ? "" :
      "Today the site made " + values.own_share_pct + " % of the electricity it used");
  }

  function updateItems(p, data, values) {
    const byFeed = new Map((values.items || []).map((item) => [String(item.feed), item]));
    p.el.querySelectorAll(".item").forEach((el) => {
      const item = byFeed.get(el.dataset.feed);
      if (!item) return;
      el.style.setProperty("--item-colour", item.colour);
      setReading(el, item.value, item.unit);
      const age = readingAge(data, item.t);
      el.classList.toggle("old", age !== null && age > p.def.stale_after_s * 1000);
      setText(el.querySelector(".when"), item.t === null ? "No reading yet" : "at " + fmtHM.format(item.t));
    });
  }

  function updatePanel(p, data, values) {
    const error = p.el.querySelector(".panel-error");
    error.hidden = !values.error;
    setText(error, values.error || "");
    if (values.error) return;
    const kind = p.def.kind;
    if (kind === "energy_flow") updateFlow(p, values);
    else if (kind === "chart_24h") updateLineChart(p.chart, values);
    else if (kind === "daily_7" || kind === "daily_30") {
      updateBarChart(p.chart, values);
      const [total, unit] = formatReading(values.total, "kWh");
      setText(p.el.querySelector(".aside"), total + " " + unit);
    } else if (p.def.items.length) updateItems(p, data, values);
    else {
      const co2 = kind === "co2_saved" || kind === "building_saved";
      setReading(p.el.querySelector(".big"), values.value, co2 ? "kg" : values.unit);
      if (kind === "building_today") updateCompare(p.el.querySelector(".compare"), values);
      if (co2) {
        const unitEl = p.el.querySelector(".unit");
        setText(unitEl, unitEl.textContent.replace(/ CO₂$/, "") + " CO₂");
        if (kind === "co2_saved") updateEquivalents(p.el.querySelector(".equivalents"), values);
      }
      setText(p.el.querySelector(".sub"), describeWhen(kind, data, values));
      // zero for a reason ("Not running: after sunset") says so, under the figure
      const why = p.el.querySelector(".why");
      if (why) {
        why.hidden = !values.why;
        setText(why, values.why || "");
      }
      const age = kind === "live_value" ? readingAge(data, values.t) : null;
      p.el.classList.toggle("old", age !== null && age > p.def.stale_after_s * 1000);
    }
  }

  // --- polling and status ------------------------------------------------------------------------

  const stats = { polls: 0, failures: 0, lastOk: null, lastError: null, state: "loading" };
  let dataTime = null;  // server's "now" of the data on screen
  let clockOffset = 0;  // server clock minus ours, so ages are right on a kiosk with a wrong clock
  const statusText = document.getElementById("status-text");
  const clock = document.getElementById("clock");

  function setState(state) {
    stats.state = state;
    if (document.body.dataset.state !== state) document.body.dataset.state = state;
  }

  function apply(data) {
    const byId = new Map(data.panels.map((v) => [v.id, v]));
    for (const p of panels) {
      const values = byId.get(p.def.id);
      if (values) updatePanel(p, data, values);
    }
    dataTime = data.now;
  }

  function poll() {
    fetch(config.dataUrl, {
      cache: "no-store",
      credentials: "same-origin",
      headers: { Accept: "application/json" },
      signal: AbortSignal.timeout(timeoutMs),
    })
      .then((response) => {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.json();
      })
      .then((data) => {
        clockOffset = data.now - Date.now();
        apply(data);
        stats.lastOk = Date.now();
        setState("ok");
      })
      .catch((error) => {
        stats.failures += 1;
        stats.lastError = String(error);
        setState("stale");  // the last data stays on screen; tick() says how old it is
      })
      .finally(() => {
        stats.polls += 1;
        tick();
        setTimeout(poll, refreshMs);
      });
  }

  function tick() {
    const now = Date.now() + clockOffset;
    setText(clock, fmtHM.format(now));
    if (stats.state === "ok") {
      setText(statusText, "Updated " + fmtHMS.format(dataTime));
    } else if (stats.state === "stale") {
      setText(statusText, dataTime === null
        ? "Waiting for the server…"
        : "No connection · data from " + fmtHM.format(dataTime) + " (" + formatAge(now - dataTime) + " old)");
    }
  }

  function start() {
    document.querySelectorAll("[data-panel]").forEach((el) => {
      const def = config.panels.find((d) => String(d.id) === el.dataset.panel);
      if (!def) return;
      const p = { def: def, el: el, chart: null };
      if (def.chart) p.chart = makeChart(el.querySelector("canvas"), def);
      panels.push(p);
    });
    tick();
    setInterval(tick, 1000);
    poll();
  }

  // For the browser tests and anyone curious in the console.
  window.kiosk = {
    stats: stats,
    chartCount: () => Object.keys(Chart.instances).length,
  };

  start();
})();
