/* The process-list editor (staff/templates/staff/process_list.html), engineers only.
 *
 * The list is edited here and saved whole: add a step (a process from the catalog and its
 * argument: a feed, picked or created inline, a value, another input, a topic), move steps up
 * and down, remove them, then Save. The server checks it as the API does
 * (staff/process_editor.py) and answers each problem under its step's index: it is shown in
 * words beside that step. Names only ever enter the page as text (textContent), never HTML.
 */
(function () {
  "use strict";

  const data = JSON.parse(document.getElementById("editor-data").textContent);
  const csrf = document.querySelector("input[name=csrfmiddlewaretoken]").value;
  const saveUrl = window.location.pathname + "save";
  const byName = new Map(data.catalog.map((p) => [p.name, p]));
  const feeds = new Map(data.feeds.map((f) => [f.id, f]));
  const inputs = new Map(data.inputs.map((i) => [i.id, i]));
  const NEW = "new";
  const state = { steps: data.steps.slice(), basedOn: data.based_on, errors: {} };
  const $ = (id) => document.getElementById(id);

  function el(tag, text, attrs) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    return node;
  }

  function argumentText(step) {
    // A saved list is checked when saved, but an old row may hold anything: shown, not run.
    if (step === null || typeof step !== "object") return JSON.stringify(step);
    if (step.new_feed) {
      const f = step.new_feed;
      return "new feed " + (f.tag ? f.tag + ":" : "") + f.name + " (" + f.interval + " s)";
    }
    if ("feed" in step) {
      const feed = feeds.get(step.feed);
      const text = feed ? feed.label : "feed " + step.feed + " (missing)";
      return "minutes" in step ? step.minutes + " min → " + text : text;
    }
    if ("input" in step) {
      const input = inputs.get(step.input);
      return input ? input.label : "input " + step.input + " (missing)";
    }
    if ("arg" in step) return String(step.arg);
    if ("topic" in step) return step.topic;
    return "";
  }

  function render() {
    const body = $("steps").querySelector("tbody");
    body.replaceChildren();
    state.steps.forEach((step, i) => {
      const row = el("tr", null, { "data-step": i });
      const process = step !== null && typeof step === "object" ? step.process : "?";
      row.append(el("td", i + 1), el("td", process), el("td", argumentText(step)));
      const now = process !== "?" && "feed" in step ? data.feed_now[String(step.feed)] : undefined;
      row.append(el("td", now === undefined ? "" : now, { class: "feed-now" }));
      const problem = el("td", (state.errors[String(i)] || []).join(" "), { class: "step-error bad" });
      const actions = el("td");
      for (const [action, label, title] of [["up", "↑", "Move up"], ["down", "↓", "Move down"], ["remove", "Remove", "Remove this step"]]) {
        const button = el("button", label, { type: "button", class: "secondary", "data-action": action, title: title + " (step " + (i + 1) + ")" });
        button.disabled = (action === "up" && i === 0) || (action === "down" && i === state.steps.length - 1);
        actions.append(button);
      }
      row.append(problem, actions);
      body.append(row);
    });
    if (!state.steps.length) {
      body.append(el("tr", null, { class: "empty" }));
      body.lastChild.append(el("td", "No steps: readings of this input are not stored.", { colspan: 6, class: "muted" }));
    }
    $("list-errors").textContent = (state.errors.list || []).join(" ");
  }

  function edited() {
    // Positions change: problems reported for the old positions no longer apply.
    state.errors = {};
    $("save-status").textContent = "Not saved yet";
    render();
  }

  $("steps").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-action]");
    if (!button) return;
    const i = Number(button.closest("tr").dataset.step);
    const to = button.dataset.action === "up" ? i - 1 : i + 1;
    if (button.dataset.action === "remove") state.steps.splice(i, 1);
    else if (to >= 0 && to < state.steps.length) [state.steps[i], state.steps[to]] = [state.steps[to], state.steps[i]];
    edited();
  });

  function fillSelect(select, options, extra) {
    select.replaceChildren();
    for (const [value, label] of extra || []) select.append(el("option", label, { value: value }));
    for (const option of options) select.append(el("option", option.label, { value: option.id }));
  }

  function feedOptions() {
    fillSelect($("arg-feed"), Array.from(feeds.values()), [[NEW, "Create a new feed…"]]);
  }

  // The default name with _2, _3 ... added while a feed of that tag and name exists (or is
  // already to be created by a step above): offering a name that clashes only invites an error.
  function freeName(tag, name) {
    const taken = new Set(Array.from(feeds.values(), (f) => f.label));
    for (const step of state.steps) {
      if (step && step.new_feed) taken.add((step.new_feed.tag ? step.new_feed.tag + ":" : "") + step.new_feed.name);
    }
    const label = (n) => (tag ? tag + ":" : "") + n;
    let candidate = name;
    for (let i = 2; taken.has(label(candidate)); i += 1) candidate = name + "_" + i;
    return candidate;
  }

  function showArguments() {
    const process = byName.get($("process").value);
    document.querySelectorAll("#add-step [data-arg]").forEach((label) => {
      label.hidden = !process.args.includes(label.dataset.arg);
    });
    const wantsFeed = process.args.includes("feed");
    const creating = wantsFeed && $("arg-feed").value === NEW;
    $("new-feed").hidden = !creating;
    if (creating) {
      const defaults = data.defaults[process.name];
      $("new-feed-name").value = freeName(defaults.tag, defaults.name);
      $("new-feed-tag").value = defaults.tag;
      $("new-feed-interval").value = defaults.interval;
      $("new-feed-unit").value = defaults.unit;
    }
  }

  // A number where one was typed; otherwise the text, for the server to refuse in words.
  function number(text) {
    const trimmed = text.trim();
    const value = Number(trimmed);
    return trimmed !== "" && Number.isFinite(value) ? value : trimmed;
  }

  $("add-step").addEventListener("submit", (event) => {
    event.preventDefault();
    const process = byName.get($("process").value);
    const step = { process: process.name };
    if (process.args.includes("minutes")) step.minutes = number($("arg-minutes").value);
    if (process.args.includes("feed")) {
      if ($("arg-feed").value === NEW) {
        step.new_feed = {
          name: $("new-feed-name").value.trim(),
          tag: $("new-feed-tag").value.trim(),
          interval: number($("new-feed-interval").value),
          unit: $("new-feed-unit").value.trim(),
        };
      } else step.feed = Number($("arg-feed").value);
    }
    if (process.args.includes("arg")) step.arg = number($("arg-value").value);
    if (process.args.includes("input")) step.input = Number($("arg-input").value);
    if (process.args.includes("topic")) step.topic = $("arg-topic").value;
    state.steps.push(step);
    edited();
    showArguments();
  });

  $("save").addEventListener("click", () => {
    $("save").disabled = true;
    $("save-status").textContent = "Saving…";
    fetch(saveUrl, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf, Accept: "application/json" },
      body: JSON.stringify({ based_on: state.basedOn, steps: state.steps }),
    })
      .then((response) => response.json().then((body) => [response.status, body]))
      .then(([status, body]) => {
        if (status === 200) {
          for (const feed of body.new_feeds) feeds.set(feed.id, feed);
          state.steps = body.steps.slice();
          state.basedOn = body.steps;
          state.errors = {};
          feedOptions();
          showArguments();
          render();
          $("save-status").textContent = "Saved: " + body.steps.length + " steps";
        } else {
          state.errors = body.errors || { list: [body.error] };
          render();
          $("save-status").textContent = "Not saved: " + body.error;
        }
      })
      .catch((error) => {
        $("save-status").textContent = "Not saved: " + String(error.message || error);
      })
      .finally(() => {
        $("save").disabled = false;
      });
  });

  fillSelect($("process"), data.catalog.map((p) => ({ id: p.name, label: p.name })));
  feedOptions();
  fillSelect($("arg-input"), data.inputs);
  $("process").addEventListener("change", showArguments);
  $("arg-feed").addEventListener("change", showArguments);
  showArguments();
  render();
  window.bmsProcessEditor = state; // for the browser tests and the curious
})();
