// The staff energy page: bars of actual against expected and the running difference (from
// the rows the page embeds), the league sorted by any column, and a model import that shows
// the figures being recomputed until the new ones are on screen.
(function () {
  function drawCharts() {
    const el = document.getElementById("energy-rows");
    if (!el || typeof Chart === "undefined") return;
    const rows = JSON.parse(el.textContent);
    const labels = rows.map((r) => r.start);
    new Chart(document.getElementById("bars"), {
      type: "bar",
      data: {
        labels,
        datasets: [
          { label: "used", data: rows.map((r) => r.actual), backgroundColor: "#2b6cb0" },
          { label: "expected", data: rows.map((r) => r.expected), backgroundColor: "#a0aec0" },
        ],
      },
      options: { animation: false, responsive: true, maintainAspectRatio: false },
    });
    const cusum = document.getElementById("cusum");
    if (cusum) {  // absent when nothing is expected: no running difference to draw
      new Chart(cusum, {
        type: "line",
        data: {
          labels,
          datasets: [{ label: "running difference (used − expected)", data: rows.map((r) => r.cusum), borderColor: "#c05621", spanGaps: false }],
        },
        options: { animation: false, responsive: true, maintainAspectRatio: false },
      });
    }
  }

  // Sort the league by a column: numbers from data-sort (blank: no figure, always last),
  // largest first on the first click, as "which used most" is the usual question.
  function sortable(table) {
    const heads = Array.from(table.tHead.rows[0].cells);
    heads.forEach((th, col) => {
      const button = th.querySelector("button");
      if (!button) return;
      button.addEventListener("click", () => {
        const text = th.dataset.type === "text";
        const first = text ? "ascending" : "descending";
        const next = th.getAttribute("aria-sort") === first ? (text ? "descending" : "ascending") : first;
        const descending = next === "descending";
        heads.forEach((h) => h.setAttribute("aria-sort", "none"));
        th.setAttribute("aria-sort", descending ? "descending" : "ascending");
        const body = table.tBodies[0];
        const rows = Array.from(body.rows);
        const key = (row) => row.cells[col].dataset.sort || "";
        rows.sort((a, b) => {
          const ka = key(a), kb = key(b);
          if (ka === "" || kb === "") return (ka === "") - (kb === "");
          const cmp = text ? ka.localeCompare(kb) : parseFloat(ka) - parseFloat(kb);
          return descending ? -cmp : cmp;
        });
        rows.forEach((r) => body.appendChild(r));
      });
    });
  }

  function importWithProgress(form) {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const status = document.getElementById("recomputing");
      const busy = [document.getElementById("figures-card"), document.getElementById("league-card")];
      const say = (text) => { if (status) { status.hidden = false; status.textContent = text; } };
      say("Importing the model and recomputing the figures…");
      busy.forEach((el) => el && el.setAttribute("aria-busy", "true"));
      form.querySelector("button").disabled = true;
      let page;
      try {
        // the import answers with a redirect to this page, which computes the figures anew
        const response = await fetch(form.action, { method: "POST", body: new FormData(form), credentials: "same-origin" });
        page = new DOMParser().parseFromString(await response.text(), "text/html");
      } catch (err) {
        say("Could not reach the server: the model was not imported. Try again.");
        busy.forEach((el) => el && el.removeAttribute("aria-busy"));
        form.querySelector("button").disabled = false;
        return;
      }
      for (const id of ["figures-card", "league-card"]) {
        const fresh = page.getElementById(id), old = document.getElementById(id);
        if (fresh && old) old.replaceWith(fresh);
      }
      const messages = page.querySelector(".messages");
      const oldMessages = document.querySelector(".messages");
      if (oldMessages) oldMessages.remove();
      if (messages) document.querySelector("h1").after(messages);
      const failed = messages && messages.querySelector(".error");
      const done = document.getElementById("recomputing");
      if (done) {
        done.hidden = false;
        done.textContent = failed
          ? "Nothing recomputed: the model was not imported (see above)."
          : "Recomputed with the model just imported: the figures below use it.";
      }
      form.reset();
      form.querySelector("button").disabled = false;
      setup();
    });
  }

  function setup() {
    drawCharts();
    const league = document.getElementById("league");
    if (league) sortable(league);
    document.body.dataset.chartsReady = "1";
  }

  const form = document.getElementById("model-form");
  if (form) importWithProgress(form);
  setup();
})();
