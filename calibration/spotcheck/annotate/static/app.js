// relgrade annotate: one pair at a time, graded with 0-3. Untrusted text goes in with
// textContent only (never innerHTML), so markup or script inside a document is shown as text.
"use strict";

const state = { items: [], grades: {}, scale: [], index: 0, busy: false, live: null };
const $ = (id) => document.getElementById(id);

function setText(id, text) {
  const el = $(id);
  el.textContent = text || "";
  el.hidden = !text;
}

function gradedCount() {
  return Object.keys(state.grades).length;
}

function firstUngraded(from) {
  const n = state.items.length;
  for (let k = 0; k < n; k++) {
    const i = (from + k) % n;
    if (!(String(i) in state.grades)) return i;
  }
  return -1;
}

function render() {
  const n = state.items.length;
  $("progress").textContent = `${gradedCount()} of ${n} graded`;
  $("done").hidden = !(n > 0 && gradedCount() === n);
  if (n === 0) { $("position").textContent = "the sample is empty"; return; }
  const item = state.items[state.index];
  $("position").textContent = `item ${state.index + 1} / ${n}`;
  setText("query", item.query);
  setText("doc-id", item.doc_id);
  setText("title", item.title);
  setText("path", item.path);
  $("document").textContent = item.document;
  setText("truncated", item.truncated ? "The document ends here: the LLM saw it cut to its prompt's length, as shown." : "");
  // Code chunks (they carry a path) read best in a fixed-width font.
  $("document").classList.toggle("code", Boolean(item.path));
  const chosen = state.grades[String(state.index)];
  for (const button of $("grades").children) {
    button.classList.toggle("chosen", Number(button.dataset.grade) === chosen);
  }
}

// The stopping figures computed by the server (the same code as `relgrade calibrate`).
// Each number is shown with 3 decimals and kept exact in data-value.
function number(id, value) {
  const el = $(id);
  el.textContent = value.toFixed(3);
  el.dataset.value = String(value);
}

function renderLive() {
  const live = state.live;
  $("live").hidden = !live;
  if (!live) return;
  setText("live-note", live.note);
  $("live-target").textContent = `±${live.target}`;
  if (!live.available) {
    for (const id of ["live-estimate", "live-cs", "live-half", "live-more"]) $(id).textContent = "–";
    $("live-stop").hidden = true;
    return;
  }
  number("live-estimate", live.estimate);
  $("live-cs").textContent = `${live.cs[0].toFixed(3)} to ${live.cs[1].toFixed(3)}`;
  $("live-cs").dataset.low = String(live.cs[0]);
  $("live-cs").dataset.high = String(live.cs[1]);
  number("live-half", live.half_width);
  $("live-more").textContent = live.may_stop ? "" : `; about ${live.more} more grades to reach it`;
  $("live-more").dataset.value = String(live.more);
  $("live-stop").hidden = !live.may_stop;
}

function buildScale() {
  const box = $("grades");
  box.replaceChildren();
  for (const { grade, meaning } of state.scale) {
    const button = document.createElement("button");
    button.type = "button";
    button.dataset.grade = String(grade);
    button.id = `grade-${grade}`;
    const key = document.createElement("b");
    key.textContent = String(grade);
    button.append(key, document.createTextNode(meaning || ""));
    button.addEventListener("click", () => grade_(grade));
    box.append(button);
  }
}

function status(text, isError) {
  $("status").textContent = text;
  $("status").classList.toggle("error", Boolean(isError));
}

async function grade_(grade) {
  if (state.busy || state.items.length === 0) return;
  const item = state.items[state.index];
  state.busy = true;
  document.body.dataset.busy = "true";
  try {
    const response = await fetch("/api/grade", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ query_id: item.query_id, doc_id: item.doc_id, grade }),
    });
    const reply = await response.json();
    if (!response.ok) throw new Error(reply.error || response.statusText);
    state.grades[String(state.index)] = grade;
    if ("live" in reply) state.live = reply.live;
    status(`saved ${grade} for ${item.doc_id}`);
    const next = firstUngraded(state.index + 1);
    if (next >= 0) state.index = next;
  } catch (err) {
    status(`NOT saved: ${err.message}`, true);
  } finally {
    state.busy = false;
    render();
    renderLive();
    delete document.body.dataset.busy;
  }
}

function move(step) {
  const n = state.items.length;
  if (n === 0) return;
  state.index = (state.index + step + n) % n;
  render();
}

document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  if (["0", "1", "2", "3"].includes(event.key)) { grade_(Number(event.key)); event.preventDefault(); }
  else if (event.key === "ArrowLeft" || event.key === "k") { move(-1); event.preventDefault(); }
  else if (event.key === "ArrowRight" || event.key === "j") { move(1); event.preventDefault(); }
});

async function load() {
  try {
    const response = await fetch("/api/state");
    const data = await response.json();
    if (!response.ok) throw new Error(data.error || response.statusText);
    state.items = data.items;
    state.grades = data.grades;
    state.scale = data.scale;
    state.live = data.live;
    document.title = `${data.title} (${data.annotator})`;
    $("annotator").textContent = `annotator: ${data.annotator}`;
    const first = firstUngraded(0);
    state.index = first >= 0 ? first : 0;
    buildScale();
    render();
    renderLive();
    document.body.dataset.ready = "true";
  } catch (err) {
    status(`cannot load the sample: ${err.message}`, true);
  }
}

$("back").addEventListener("click", () => move(-1));
$("skip").addEventListener("click", () => move(1));
load();
