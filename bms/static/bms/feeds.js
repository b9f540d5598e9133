// Feed explorer: pick feeds, choose or drag a time range, averaged data from /feed/data.json.
(function () {
  "use strict";
  const TARGET_POINTS = 800;
  const COLOURS = ["#0b5cad", "#c0262d", "#17803d", "#b36b00", "#6f42c1", "#0f8a8a", "#7a4b00", "#d63384"];
  const state = { end: Date.now(), span: 86400 * 1000 };
  const errorBox = document.getElementById("error");

  const chart = new Chart(document.getElementById("chart"), {
    type: "line",
    data: { datasets: [] },
    options: {
      animation: false, parsing: false, normalized: true, maintainAspectRatio: false,
      interaction: { mode: "nearest", axis: "x", intersect: false },
      elements: { point: { radius: 0 }, line: { borderWidth: 1.5 } },
      scales: {
        x: { type: "linear", ticks: { maxTicksLimit: 8, callback: (v) => formatTime(v) } },
        y: { beginAtZero: false },
      },
      plugins: { tooltip: { callbacks: { title: (items) => items.length ? formatTime(items[0].parsed.x, true) : "" } } },
    },
  });

  function formatTime(ms, full) {
    const d = new Date(ms);
    if (full || state.span <= 2 * 86400 * 1000) {
      return d.toLocaleString([], full ? {} : { hour: "2-digit", minute: "2-digit", day: "numeric", month: "short" });
    }
    return d.toLocaleDateString([], { day: "numeric", month: "short", year: state.span > 400 * 86400 * 1000 ? "numeric" : undefined });
  }

  function selectedFeeds() {
    return Array.from(document.querySelectorAll("#feed-list input:checked")).map((el) => ({
      id: el.value, interval: Number(el.dataset.interval), unit: el.dataset.unit, name: el.dataset.name,
    }));
  }

  function requestParams(feeds) {
    const start = Math.floor((state.end - state.span) / 1000);
    const end = Math.floor(state.end / 1000);
    const finest = Math.max(1, ...feeds.map((f) => f.interval));
    let interval = Math.ceil((end - start) / TARGET_POINTS);
    interval = Math.max(finest, Math.ceil(interval / finest) * finest);
    return { start, end, interval };
  }

  async function load() {
    const feeds = selectedFeeds();
    const p = requestParams(feeds.length ? feeds : [{ interval: 10 }]);
    document.getElementById("range-label").textContent =
      `${new Date(p.start * 1000).toLocaleString()} – ${new Date(p.end * 1000).toLocaleString()} (${p.interval} s)`;
    document.getElementById("export").href = feeds.length
      ? `/staff/feeds/export.csv?ids=${feeds.map((f) => f.id).join(",")}&start=${p.start}&end=${p.end}&interval=${p.interval}`
      : "#";
    errorBox.textContent = "";
    const datasets = [];
    for (const [i, feed] of feeds.entries()) {
      const url = `/feed/data.json?id=${feed.id}&start=${p.start}&end=${p.end}&interval=${p.interval}&average=1`;
      try {
        const response = await fetch(url, { credentials: "same-origin" });
        const body = await response.json();
        if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
        datasets.push({
          label: feed.unit ? `${feed.name} (${feed.unit})` : feed.name,
          data: body.map(([x, y]) => ({ x, y })),
          borderColor: COLOURS[i % COLOURS.length], backgroundColor: COLOURS[i % COLOURS.length],
          spanGaps: false,
        });
      } catch (err) {
        errorBox.textContent = `${feed.name}: ${err.message}`;
      }
    }
    chart.data.datasets = datasets;
    chart.options.scales.x.min = p.start * 1000;
    chart.options.scales.x.max = p.end * 1000;
    chart.update("none");
  }

  document.querySelectorAll("[data-span]").forEach((button) =>
    button.addEventListener("click", () => { state.span = Number(button.dataset.span) * 1000; state.end = Date.now(); load(); }));
  document.getElementById("zoom-in").addEventListener("click", () => { state.end -= state.span / 4; state.span /= 2; load(); });
  document.getElementById("zoom-out").addEventListener("click", () => { state.end = Math.min(Date.now(), state.end + state.span / 2); state.span *= 2; load(); });
  document.getElementById("pan-left").addEventListener("click", () => { state.end -= state.span / 2; load(); });
  document.getElementById("pan-right").addEventListener("click", () => { state.end = Math.min(Date.now(), state.end + state.span / 2); load(); });
  document.getElementById("feed-list").addEventListener("change", load);

  // Drag to zoom: map the pixels where the drag started and ended to times.
  const canvas = document.getElementById("chart");
  let dragFrom = null;
  canvas.addEventListener("mousedown", (e) => { dragFrom = e.offsetX; });
  canvas.addEventListener("mouseup", (e) => {
    if (dragFrom === null) return;
    const a = chart.scales.x.getValueForPixel(Math.min(dragFrom, e.offsetX));
    const b = chart.scales.x.getValueForPixel(Math.max(dragFrom, e.offsetX));
    dragFrom = null;
    if (b - a > 60 * 1000) { state.end = b; state.span = b - a; load(); }
  });

  load();
})();
