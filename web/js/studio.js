// tformer studio: translate with a model served by `tformer serve`, and look
// inside it: the attention of every layer and head, the tokenizer's pieces,
// one encoder block step by step, and the training loss. Everything comes
// from the JSON API (api.js); everything is drawn as SVG (draw.js).

import { api } from "./api.js";
import { heatmap, html, lineChart } from "./draw.js";

const $ = (id) => document.getElementById(id);

const state = {
  model: 0,
  info: null, // GET /api/v1/model
  translation: null, // the last POST /api/v1/translate
  attention: { sentence: 0, kind: "encoder", layer: 0, head: "avg" },
  inside: null,
  step: 0,
  events: null, // the EventSource of the run shown
  steps: [], // the run's [step, loss]
};

// ---- messages -------------------------------------------------------------------------------------

function showError(error) {
  const box = $("status");
  box.textContent = error.message || String(error);
  box.hidden = false;
}

function clearError() {
  $("status").hidden = true;
  $("status").textContent = "";
}

// runs an action of the page; a failure is said in the status line, in words
async function attempt(action) {
  try {
    clearError();
    await action();
  } catch (e) {
    showError(e);
  }
}

const quote = (s) => `“${s}”`;
const number = (x) => x.toLocaleString("en-GB");

// ---- tabs (the WAI-ARIA pattern: arrows move between tabs, Tab into the panel) --------------------

function setupTabs() {
  const tabs = [...document.querySelectorAll('[role="tab"]')];
  const select = (tab) => {
    for (const t of tabs) {
      const on = t === tab;
      t.setAttribute("aria-selected", on);
      t.tabIndex = on ? 0 : -1;
      $(t.getAttribute("aria-controls")).hidden = !on;
    }
    if (tab.id === "tab-training") showRuns();
  };
  tabs.forEach((tab, i) => {
    tab.addEventListener("click", () => select(tab));
    tab.addEventListener("keydown", (e) => {
      const next = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[e.key];
      if (next === undefined) return;
      e.preventDefault();
      const t = tabs[(next + tabs.length) % tabs.length];
      t.focus();
      select(t);
    });
  });
}

// ---- the model ------------------------------------------------------------------------------------

async function loadModels() {
  const { models } = await api.models();
  const pick = $("model");
  pick.textContent = "";
  for (const m of models) html("option", { value: m.id }, pick, `${m.name} (${m.kind}, ${m.tokenizer})`);
  pick.addEventListener("change", () => attempt(() => selectModel(Number(pick.value))));
  await selectModel(models[0].id);
}

async function selectModel(id) {
  state.model = id;
  const info = await api.model(id);
  state.info = info;
  const copy = info.kind === "copy";
  const t = info.training;
  const bleu = t.validation_bleu
    ? "validation BLEU " + Object.entries(t.validation_bleu).map(([k, v]) => `${v.toFixed(2)} (${k})`).join(", ")
    : t.exact_sequence_accuracy_percent !== undefined
      ? `exact copies ${t.exact_sequence_accuracy_percent}%`
      : "";
  $("model-summary").textContent =
    `${copy ? "Copy task" : "Translator"}: ${number(info.parameters.total)} parameters, ` +
    `d ${info.config.num_hiddens}, ${info.config.num_heads} heads, ${info.config.num_layers} layer${info.config.num_layers === 1 ? "" : "s"}; ` +
    `trained ${number(t.steps)} steps` + (bleu ? `; ${bleu}` : "");
  $("text-label").textContent = copy ? "Sequences of the symbols 1–10, one per line" : "Sentences, one per line";
  if (copy && !/^[\d\s,]+$/.test($("text").value)) $("text").value = "1 2 3 4 5 6 7 8 9 10\n1 7 7 3 9";
  if (!copy && /^[\d\s,]+$/.test($("text").value)) $("text").value = "I'm home.\nHe's calm.";
  if (copy) $("inside-text").value = "1 2 3 4 5 6 7 8 9 10";
  else if (/^[\d\s,]+$/.test($("inside-text").value)) $("inside-text").value = "I'm home.";
  $("pieces-limit").textContent = info.max_tokens;
  const layers = $("inside-layer");
  layers.textContent = "";
  for (let i = 0; i < info.config.num_layers; ++i) html("option", { value: i }, layers, `${i + 1} of ${info.config.num_layers}`);
  renderModelInfo(info);
  state.translation = null;
  $("results").textContent = "";
  $("attention").hidden = true;
  $("attention-empty").hidden = false;
  $("inside").hidden = true;
  updatePieces();
}

function renderModelInfo(info) {
  const box = $("model-info");
  box.textContent = "";
  const cols = html("div", { class: "columns" }, box);
  const left = html("div", {}, cols);
  html("h3", { class: "small" }, left, "Configuration");
  const table = html("table", { class: "kv" }, left);
  const rows = {
    kind: info.kind,
    pipeline: info.pipeline,
    tokenizer: info.tokenizer,
    "vocabulary (source / target)": `${info.vocabulary.source} / ${info.vocabulary.target}` + (info.vocabulary.joint ? " (one joint vocabulary)" : ""),
    "longest input": `${info.max_tokens} tokens`,
    ...Object.fromEntries(Object.entries(info.config).filter(([k]) => !k.endsWith("vocab_size") && k !== "task")),
  };
  for (const [k, v] of Object.entries(rows)) {
    const tr = html("tr", {}, table);
    html("th", { scope: "row" }, tr, k.replaceAll("_", " "));
    html("td", {}, tr, String(v));
  }
  const t = info.training;
  html("h3", { class: "small" }, left, "Training");
  const tt = html("table", { class: "kv" }, left);
  const facts = { steps: number(t.steps), epochs: t.epochs, "final epoch loss": t.final_loss === null ? "— (no epoch finished)" : t.final_loss.toFixed(4) };
  if (t.preset) facts.preset = t.preset;
  if (t.validation_loss !== undefined && t.training_sample_loss !== undefined) {
    facts["loss per token, validation / training pairs"] =
      `${t.validation_loss.toFixed(4)} / ${t.training_sample_loss.toFixed(4)} (teacher-forced, no label smoothing; the gap is what it learned by heart)`;
  }
  for (const [k, v] of Object.entries(t.validation_bleu || {})) {
    facts[`validation BLEU, ${k}`] = v.toFixed(2);
    const chrf = (t.validation_chrf2 || {})[k];
    if (chrf !== undefined) facts[`validation chrF2, ${k}`] = chrf.toFixed(2);
    const buckets = (t.validation_bleu_by_length || {})[k];
    if (buckets) {
      facts[`BLEU by source length, ${k}`] = buckets.map((b) => `${b.source_words}: ${b.bleu.toFixed(2)} (${number(b.sentences)} sentences)`).join("; ");
    }
  }
  if (t.exact_sequence_accuracy_percent !== undefined) facts["exact copies"] = `${t.exact_sequence_accuracy_percent}%`;
  for (const [k, v] of Object.entries(facts)) {
    const tr = html("tr", {}, tt);
    html("th", { scope: "row" }, tr, k);
    html("td", {}, tr, String(v));
  }
  const right = html("div", {}, cols);
  html("h3", { class: "small" }, right, `Parameters: ${number(info.parameters.total)}`);
  const list = html("table", { class: "params" }, right);
  const most = Math.max(...info.parameters.modules.map((m) => m.parameters));
  for (const m of info.parameters.modules) {
    const tr = html("tr", {}, list);
    html("th", { scope: "row" }, tr, m.module);
    html("td", { class: "num" }, tr, number(m.parameters));
    const bar = html("td", {}, tr);
    const b = html("span", { class: "bar" }, bar);
    b.style.width = `${Math.max(1, (120 * m.parameters) / most)}px`;
  }
}

// ---- translate --------------------------------------------------------------------------------------

function setupTranslate() {
  const form = $("translate-form");
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    attempt(translate);
  });
  $("text").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      attempt(translate);
    }
  });
  let timer = null;
  $("text").addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(updatePieces, 300);
  });
  const greedy = () => document.querySelector('input[name="search"]:checked').value === "greedy";
  for (const r of document.querySelectorAll('input[name="search"]'))
    r.addEventListener("change", () => {
      $("beam").disabled = greedy();
      $("n-best").disabled = greedy();
    });
}

function lines() {
  return $("text")
    .value.split("\n")
    .filter((l) => l.trim() !== "");
}

async function translate() {
  const sentences = lines();
  if (!sentences.length) throw new Error("There is nothing to translate: type a sentence first.");
  const greedy = document.querySelector('input[name="search"]:checked').value === "greedy";
  const body = { model: state.model, sentences, attention: true };
  if (greedy) body.search = "greedy";
  else {
    body.beam = Number($("beam").value);
    body.n_best = Math.min(Number($("n-best").value), body.beam);
  }
  const button = $("translate");
  button.disabled = true;
  button.textContent = "Translating…";
  // the newest request wins: an answer to an older one (the page's first translation, still
  // on its way when the reader asks for another) is dropped, not drawn over the newer one
  const ticket = (state.translateTicket = (state.translateTicket || 0) + 1);
  let answer;
  try {
    answer = await api.translate(body);
  } finally {
    if (ticket === state.translateTicket) {
      button.disabled = false;
      button.textContent = "Translate";
    }
  }
  if (ticket !== state.translateTicket) return;
  state.translation = answer;
  renderResults(state.translation);
  state.attention.sentence = 0;
  renderAttention();
  updatePieces();
}

function renderResults(r) {
  const box = $("results");
  box.textContent = "";
  const s = r.search;
  html("p", { class: "timing" }, box,
    `${r.sentences.length} ${r.sentences.length === 1 ? "sentence" : "sentences"} in ${r.milliseconds.toFixed(1)} ms, ` +
    (s.kind === "greedy" ? "greedy search" : `beam search, beam ${s.beam}`) +
    `; scores are ${s.score}.`);
  r.sentences.forEach((sentence) => {
    const block = html("div", { class: "result" }, box);
    html("p", { class: "source" }, block, sentence.text);
    const list = html("ol", { class: "nbest" }, block);
    sentence.translations.forEach((t) => {
      const li = html("li", {}, list);
      html("span", { class: "translation" }, li, t.text || "(nothing)");
      html("span", { class: "score" }, li, `score ${t.score.toFixed(3)}`);
    });
  });
}

// ---- attention ----------------------------------------------------------------------------------------

const KIND_TITLES = {
  encoder: "Encoder self-attention",
  decoder_self: "Decoder self-attention (masked)",
  decoder_cross: "Encoder–decoder attention",
};

function setupAttention() {
  $("attention-sentence").addEventListener("change", (e) => {
    state.attention.sentence = Number(e.target.value);
    renderAttention();
  });
  for (const r of document.querySelectorAll('input[name="attention-kind"]'))
    r.addEventListener("change", () => {
      state.attention.kind = r.value;
      state.attention.layer = 0;
      state.attention.head = "avg";
      renderAttention();
    });
}

function average(maps) {
  return maps[0].map((row, r) => row.map((_, c) => maps.reduce((s, m) => s + m[r][c], 0) / maps.length));
}

// the labels of a map's rows and columns
function axes(a, kind) {
  if (kind === "encoder") return { rows: a.source, cols: a.source };
  if (kind === "decoder_self") return { rows: a.target_in, cols: a.target_in };
  return { rows: a.target_out, cols: a.source };
}

function renderAttention() {
  const r = state.translation;
  if (!r) return;
  $("attention-empty").hidden = true;
  $("attention").hidden = false;
  const pick = $("attention-sentence");
  pick.textContent = "";
  r.sentences.forEach((s, i) => html("option", { value: i }, pick, `${i + 1}. ${s.text}`));
  pick.value = state.attention.sentence;
  pick.disabled = r.sentences.length < 2;
  const a = r.sentences[state.attention.sentence].attention;
  const kind = state.attention.kind;
  const layers = a[kind];
  const heads = layers[0].length;

  const grid = $("attention-grid");
  grid.textContent = "";
  grid.style.gridTemplateColumns = `auto repeat(${heads + 1}, auto)`;
  html("span", {}, grid);
  for (let h = 0; h < heads; ++h) html("span", { class: "col-head" }, grid, `head ${h + 1}`);
  html("span", { class: "col-head" }, grid, "average");
  layers.forEach((maps, l) => {
    html("span", { class: "row-head" }, grid, `layer ${l + 1}`);
    [...maps.map((m, h) => [m, h]), [average(maps), "avg"]].forEach(([m, h]) => {
      const selected = state.attention.layer === l && state.attention.head === h;
      const name = `Layer ${l + 1}, ${h === "avg" ? "average over the heads" : `head ${h + 1}`}`;
      const b = html("button", { type: "button", class: "thumb", "aria-label": name, "aria-pressed": selected }, grid);
      const side = Math.max(m.length, m[0].length);
      b.appendChild(heatmap(m, { cell: Math.max(2, Math.floor(84 / side)), titles: false, label: name }).root);
      b.addEventListener("click", () => {
        state.attention.layer = l;
        state.attention.head = h;
        renderAttention();
        document.querySelector(`#attention-grid .thumb[aria-pressed="true"]`).focus();
      });
    });
  });

  const maps = layers[state.attention.layer];
  const m = state.attention.head === "avg" ? average(maps) : maps[state.attention.head];
  const ax = axes(a, kind);
  $("attention-title").textContent =
    `${KIND_TITLES[kind]}, layer ${state.attention.layer + 1}, ` +
    (state.attention.head === "avg" ? "average over the heads" : `head ${state.attention.head + 1}`) +
    (kind === "decoder_cross" ? " — rows: the token written at that step" : "");
  const side = Math.max(m.length, m[0].length);
  const readout = $("attention-readout");
  const top = (values, labels) =>
    values
      .map((v, i) => [v, i])
      .sort((x, y) => y[0] - x[0])
      .slice(0, 3)
      .filter(([v]) => v > 0)
      .map(([v, i]) => `${quote(labels[i])} (${v.toFixed(2)})`)
      .join(", ");
  const map = heatmap(m, {
    rowLabels: ax.rows,
    colLabels: ax.cols,
    cell: Math.max(12, Math.min(44, Math.floor(560 / side))),
    label: $("attention-title").textContent,
    onFocusToken: (which, i) => {
      if (which === "row") {
        map.highlight(i, -1);
        const who = kind === "decoder_cross" ? `Writing ${quote(ax.rows[i])}, the decoder` : quote(ax.rows[i]);
        readout.textContent = `${who} (row ${i + 1}) attends most to ${top(m[i], ax.cols)}.`;
      } else if (which === "col") {
        map.highlight(-1, i);
        readout.textContent = `${quote(ax.cols[i])} (column ${i + 1}) is attended to most by ${top(m.map((row) => row[i]), ax.rows)}.`;
      } else {
        map.highlight(-1, -1);
      }
    },
  });
  const box = $("attention-map");
  box.textContent = "";
  box.appendChild(map.root);
  readout.textContent = "";
}

// ---- pieces --------------------------------------------------------------------------------------------

let piecesRequest = 0;
async function updatePieces() {
  const box = $("pieces");
  const texts = lines().slice(0, 16);
  const ticket = ++piecesRequest;
  const results = [];
  try {
    for (const text of texts) results.push(await api.tokenize({ model: state.model, text }));
  } catch (e) {
    if (ticket === piecesRequest) $("token-count").textContent = "";
    return; // said when translating
  }
  if (ticket !== piecesRequest) return; // a later edit is being counted
  box.textContent = "";
  const max = state.info ? state.info.max_tokens : 0;
  const counts = results.map((r) => r.tokens);
  const over = counts.filter((c) => c > max).length;
  $("token-count").textContent = counts.length
    ? `Tokens per line: ${counts.join(", ")} of at most ${max}.` + (over ? ` ${over} ${over === 1 ? "line is" : "lines are"} too long.` : "")
    : "";
  $("token-count").classList.toggle("warn", over > 0);
  results.forEach((r, i) => {
    const row = html("div", { class: "pieces-row" }, box);
    html("h3", { class: "small" }, row, `${i + 1}. ${texts[i]} — ${r.tokens} tokens${r.fits ? "" : ", more than the model reads"}`);
    const chips = html("ol", { class: "chips", "aria-label": `pieces of line ${i + 1}` }, row);
    for (const p of r.pieces) {
      const li = html("li", {}, chips);
      html("span", { class: "piece" }, li, p.piece);
      html("span", { class: "id" }, li, String(p.id));
    }
    const t = state.translation && state.translation.sentences.find((s) => s.text === texts[i]);
    if (t) {
      html("p", { class: "help" }, row, `Its translation ${quote(t.translations[0].text)}, piece by piece:`);
      const out = html("ol", { class: "chips target", "aria-label": `pieces of the translation of line ${i + 1}` }, row);
      for (const p of t.translations[0].pieces) {
        const li = html("li", {}, out);
        html("span", { class: "piece" }, li, p.piece);
        html("span", { class: "id" }, li, String(p.id));
      }
    }
  });
}

// ---- inside one layer ----------------------------------------------------------------------------------

function setupInside() {
  $("inside-form").addEventListener("submit", (e) => {
    e.preventDefault();
    attempt(walk);
  });
  $("step-prev").addEventListener("click", () => showStep(state.step - 1));
  $("step-next").addEventListener("click", () => showStep(state.step + 1));
  $("inside").addEventListener("keydown", (e) => {
    if (e.target.tagName === "INPUT") return;
    if (e.key === "ArrowRight" || e.key === "ArrowDown") showStep(state.step + 1, true);
    if (e.key === "ArrowLeft" || e.key === "ArrowUp") showStep(state.step - 1, true);
  });
}

async function walk() {
  const text = $("inside-text").value;
  if (!text.trim()) throw new Error("Type a sentence to walk through the encoder block.");
  state.inside = await api.inside({ model: state.model, text, layer: Number($("inside-layer").value) });
  const list = $("inside-steps");
  list.textContent = "";
  state.inside.steps.forEach((s, i) => {
    const li = html("li", {}, list);
    const b = html("button", { type: "button", "aria-current": "false" }, li, s.title);
    b.addEventListener("click", () => showStep(i));
  });
  $("inside").hidden = false;
  showStep(0);
}

function showStep(i, focus = false) {
  const w = state.inside;
  if (!w || i < 0 || i >= w.steps.length) return;
  state.step = i;
  const s = w.steps[i];
  [...$("inside-steps").querySelectorAll("button")].forEach((b, j) => {
    b.setAttribute("aria-current", j === i ? "step" : "false");
    if (j === i && focus) b.focus();
  });
  $("step-title").textContent = `Step ${i + 1} of ${w.steps.length}: ${s.title}`;
  $("step-section").textContent = s.section;
  $("step-formula").textContent = s.formula;
  const dims = s.per_head ? ["heads", "positions", s.name === "scores" || s.name === "weights" ? "keys" : "features"] : ["positions", "features"];
  $("step-shape").textContent = `shape (${s.shape.join(", ")}): ${s.shape.map((n, k) => `${n} ${dims[k]}`).join(" × ")}`;
  $("step-shown").textContent = s.shown === "all of it" ? "" : `Too large to draw whole: ${s.shown}.`;
  $("step-prev").disabled = i === 0;
  $("step-next").disabled = i === w.steps.length - 1;
  const box = $("step-map");
  box.textContent = "";
  const tokens = w.tokens.slice(0, 32);
  const weights = s.name === "weights";
  const square = s.name === "scores" || weights;
  const draw = (m, label) => {
    const side = Math.max(m.length, m[0].length);
    const cell = Math.max(5, Math.min(s.per_head ? 16 : 22, Math.floor((s.per_head ? 300 : 760) / side)));
    return heatmap(m, {
      rowLabels: tokens.slice(0, m.length),
      colLabels: square ? tokens.slice(0, m[0].length) : null,
      cell,
      cellHeight: Math.max(cell, 16), // room for the tokens' labels
      signed: !weights,
      label,
    }).root;
  };
  if (s.per_head) {
    const wrap = html("div", { class: "heads" }, box);
    s.values.forEach((m, h) => {
      const fig = html("figure", {}, wrap);
      fig.appendChild(draw(m, `${s.title}, head ${h + 1}`));
      html("figcaption", {}, fig, `head ${h + 1}`);
    });
  } else {
    box.appendChild(draw(s.values, s.title));
  }
  html("p", { class: "help" }, box, weights ? "White is 0, dark blue 1." : "Blue is negative, red positive, white 0; the darkest is the largest magnitude of this step.");
}

// ---- training -----------------------------------------------------------------------------------------------

let runsLoaded = false;
async function showRuns() {
  if (runsLoaded) return;
  runsLoaded = true;
  await attempt(async () => {
    const { runs } = await api.runs();
    if (!runs.length) return;
    $("training-empty").hidden = true;
    $("training").hidden = false;
    const pick = $("run");
    for (const r of runs) html("option", { value: r.id }, pick, `${r.name} (${number(r.steps)} steps)`);
    pick.addEventListener("change", () => attempt(() => showRun(Number(pick.value))));
    await showRun(runs[0].id);
  });
}

async function showRun(id) {
  if (state.events) state.events.close();
  const run = await api.run(id);
  state.steps = run.steps;
  const epochs = run.epochs;
  const draw = () => {
    const box = $("loss-chart");
    box.textContent = "";
    const series = [{ name: "loss per step", points: state.steps, className: "steps" }];
    // a running mean over 1/20 of the steps, so the trend shows through the noise
    const k = Math.max(1, Math.floor(state.steps.length / 20));
    if (state.steps.length > 2 * k) {
      const mean = [];
      let sum = 0;
      state.steps.forEach(([x, y], i) => {
        sum += y;
        if (i >= k) sum -= state.steps[i - k][1];
        if (i >= k - 1) mean.push([x, sum / k]);
      });
      series.push({ name: `mean of ${k} steps`, points: mean, className: "mean" });
    }
    box.appendChild(lineChart(series, { xLabel: "step", yLabel: "loss", label: `training loss of ${run.name}` }));
    const last = state.steps[state.steps.length - 1];
    // the epoch means (loss.csv) as numbers: the folder does not say where each epoch ended
    const means = epochs.length
      ? ` Epoch means: ${epochs.slice(-5).map((y) => y.toFixed(4)).join(", ")}${epochs.length > 5 ? ` (the last 5 of ${epochs.length})` : ""}.`
      : "";
    $("run-status").textContent = last
      ? `${state.live ? "Training now" : "Not training now"}: step ${number(last[0])}, loss ${last[1].toFixed(4)}.${means}`
      : "No steps yet: the run has not started writing progress.csv.";
  };
  state.live = run.live;
  draw();
  let pending = null;
  state.events = api.runEvents(id, run.offset);
  state.events.onmessage = (e) => {
    const p = JSON.parse(e.data);
    state.steps.push([p.step, p.loss]);
    state.live = true;
    if (!pending) pending = setTimeout(() => { pending = null; draw(); }, 500);
  };
  state.events.addEventListener("reset", () => attempt(() => showRun(id)));
}

// ---- start --------------------------------------------------------------------------------------------------

setupTabs();
setupTranslate();
setupAttention();
setupInside();
attempt(async () => {
  await loadModels();
  await translate();
});
