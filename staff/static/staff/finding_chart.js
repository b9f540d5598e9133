// The small chart of a finding's evidence (docs/FINDINGS.md): drawn once, when a person opens
// "Chart of the evidence", from /staff/findings/<id>/evidence.json. A linear axis of
// milliseconds with labels in the site's time zone (no date adapter is shipped), no
// animation, points as {x, y}: the habits of the feed explorer and the kiosks.
(function () {
  "use strict";
  // Chart.js scriptable radius: 2.5 for a value with no value either side, else none.
const isolatedDot = (ctx) => {
  const data = ctx.dataset.data;
  const blank = (j) => j < 0 || j >= data.length || data[j].y === null;
  const i = ctx.dataIndex;
  return !blank(i) && blank(i - 1) && blank(i + 1) ? 2.5 : 0;
};
const COLOURS = ["#2f6fb3", "#d9822b", "#3a9d5d", "#b53b3b", "#7d5ba6", "#8c6d31"];

  // 24-hour times in British English whatever the browser's language, as the feed explorer
  // and the kiosks draw them: an en-US browser showed "Mon 7, 05:00 PM" (fresh-eyes tester).
  function formatter(tz) {
    const options = {
      weekday: "short", day: "numeric", hour: "2-digit", minute: "2-digit", hourCycle: "h23",
    };
    try {
      return new Intl.DateTimeFormat("en-GB", { ...options, timeZone: tz || undefined });
    } catch (e) {
      return new Intl.DateTimeFormat("en-GB", options); // an unknown zone: the browser's own
    }
  }

  function scales(body, units, when) {
    const out = {
      x: {
        type: "linear", min: body.start, max: body.end,
        ticks: { maxRotation: 0, autoSkipPadding: 24, callback: (v) => when.format(v) },
      },
    };
    units.forEach((unit, i) => {
      out[`y${i}`] = {
        type: "linear", position: i % 2 ? "right" : "left",
        title: { display: true, text: unit || "no unit" },
        grid: { drawOnChartArea: i === 0 },
        ...(unit === "on/off" ? { min: -0.1, max: 1.1, ticks: { stepSize: 1 } } : {}),
      };
    });
    return out;
  }

  async function draw(details) {
    const canvas = details.querySelector("canvas");
    const status = details.querySelector(".chart-status");
    if (canvas.dataset.drawn) return;
    canvas.dataset.drawn = "1";
    status.textContent = "Loading…";
    try {
      const response = await fetch(canvas.dataset.url, { credentials: "same-origin" });
      const body = await response.json();
      if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
      const units = [...new Set(body.series.map((s) => s.unit))];
      const when = formatter(canvas.dataset.timezone);
      new Chart(canvas, {
        type: "line",
        data: {
          datasets: body.series.map((s, i) => ({
            label: s.label,
            data: s.points.map(([x, y]) => ({ x, y })),
            yAxisID: `y${units.indexOf(s.unit)}`,
            stepped: s.step ? "after" : false, // a command holds until the next one
            borderColor: COLOURS[i % COLOURS.length],
            backgroundColor: COLOURS[i % COLOURS.length],
            // A reading between gaps has no line to draw: it gets a dot, or a sensor posting
            // less often than the chart's step showed an empty chart.
            pointRadius: isolatedDot, borderWidth: 1.5, spanGaps: false,
          })),
        },
        options: {
          animation: false, parsing: false, normalized: true, maintainAspectRatio: false,
          interaction: { mode: "nearest", axis: "x", intersect: false },
          scales: scales(body, units, when),
          plugins: { tooltip: { callbacks: { title: (items) => items.length ? when.format(items[0].parsed.x) : "" } } },
        },
      });
      status.textContent = body.series.length ? "" : "No series to draw.";
    } catch (error) {
      status.textContent = `The chart could not be drawn: ${error.message}`;
    }
  }

  document.querySelectorAll("details.evidence-chart").forEach((details) => {
    details.addEventListener("toggle", () => { if (details.open) draw(details); });
  });
})();
