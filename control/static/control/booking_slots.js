// Booking calendar: a click on an empty time of a day fills the new-booking form with that day
// and the half hour clicked (one hour long) and puts the cursor in the title, so booking a free
// slot is click, type a title, Book. Clicks on a booking keep going to the booking. Past days
// are not bookable (no class), and today's time already past does nothing.
(function () {
  "use strict";
  var form = document.getElementById("new-booking");
  if (!form) return;

  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function hhmm(minutes) {
    minutes = Math.min(minutes, 24 * 60 - 1);
    return pad(Math.floor(minutes / 60)) + ":" + pad(minutes % 60);
  }

  document.querySelectorAll(".day.bookable").forEach(function (day) {
    day.addEventListener("click", function (event) {
      if (event.target.closest(".booking")) return;
      var box = day.getBoundingClientRect();
      var first = parseInt(day.dataset.firstHour, 10) * 60;
      var span = parseInt(day.dataset.hours, 10) * 60;
      var at = first + ((event.clientY - box.top) / box.height) * span;
      var start = Math.max(first, Math.floor(at / 30) * 30);
      // Today's half hours that have begun are past: a start there would be refused.
      if (day.dataset.nowMinutes && start < parseInt(day.dataset.nowMinutes, 10)) return;
      form.querySelector("[name=day]").value = day.dataset.date;
      form.querySelector("[name=start]").value = hhmm(start);
      form.querySelector("[name=end]").value = hhmm(start + 60);
      form.scrollIntoView({ block: "center" });
      form.querySelector("[name=title]").focus();
    });
  });
})();
