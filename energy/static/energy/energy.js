// Bars of actual against expected and the CUSUM line, from the rows the page embeds.
(function () {
  const el = document.getElementById("energy-rows");
  if (!el || typeof Chart === "undefined") return;
  const rows = JSON.parse(el.textContent);
  const labels = rows.map((r) => r.start);
  new Chart(document.getElementById("bars"), {
    type: "bar",
    data: {
      labels,
      datasets: [
        { label: "actual", data: rows.map((r) => r.actual), backgroundColor: "#2b6cb0" },
        { label: "expected", data: rows.map((r) => r.expected), backgroundColor: "#a0aec0" },
      ],
    },
    options: { animation: false, responsive: true, maintainAspectRatio: false },
  });
  new Chart(document.getElementById("cusum"), {
    type: "line",
    data: {
      labels,
      datasets: [{ label: "CUSUM (actual − expected)", data: rows.map((r) => r.cusum), borderColor: "#c05621", spanGaps: false }],
    },
    options: { animation: false, responsive: true, maintainAspectRatio: false },
  });
  document.body.dataset.chartsReady = "1";
})();
