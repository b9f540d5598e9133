// Schedule editor: "Copy to" repeats one day's periods (from, to, °C of every row) on the days
// chosen, so a Mon–Fri week is typed once. The server checks the result as if typed by hand.
(function () {
  "use strict";
  function rowInputs(day) {
    return document.querySelectorAll('#week tr[data-day="' + day + '"] input');
  }
  document.querySelectorAll("select.copy-day").forEach(function (select) {
    select.addEventListener("change", function () {
      if (!select.value) return;
      var from = select.closest("tr").dataset.day;
      var source = rowInputs(from);
      select.value.split(",").forEach(function (day) {
        if (day === from) return;
        var target = rowInputs(day);
        for (var i = 0; i < source.length && i < target.length; i++) target[i].value = source[i].value;
      });
      select.value = "";
    });
  });
})();
