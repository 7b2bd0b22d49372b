// A knowledge base's retrieval evaluations: the runs, each configuration's scores, the
// configuration a bot should use, the cases missed with what came instead; and a new run.
import { call, seg } from "./api.js";
import { field, fill, fixed, h, when } from "./dom.js";
import { attempt, InputError, showError, showInfo } from "./notice.js";

const EXAMPLE = '{"query": "How long do refunds take?", "expected": ["refunds are paid within"]}';

export function renderEvaluations(container, kb) {
  const path = `/api/v1/knowledge-bases/${seg(kb.id)}/evaluations`;
  const runs = h("div", { id: "evaluation-runs" }, h("p", { class: "muted", text: "Loading…" }));
  const detail = h("div", { id: "evaluation-detail" });
  let left = false;

  async function load(selectId = null) {
    const items = await attempt(() => call("GET", path, { query: { limit: 20 } }));
    if (left || !items) return;
    fill(runs, runTable(items, (run) => show(run)));
    const chosen = items.find((run) => run.id === selectId) ?? items[0];
    if (chosen) show(chosen);
    else fill(detail);
  }

  function show(run) {
    for (const tr of runs.querySelectorAll("tr[data-evaluation-id]")) {
      tr.classList.toggle("selected", tr.dataset.evaluationId === run.id);
    }
    fill(detail, evaluation(run));
  }

  fill(container,
    startForm(path, (run) => {
      showInfo(`Evaluation ${run.id}: ${run.case_count} cases, best ${label(run.best)} `
        + `(nDCG@10 ${fixed(run.best_scores.ndcg_at_10)}).`);
      load(run.id);
    }),
    h("h2", { text: "Runs" }), runs, detail);
  load();
  return () => {
    left = true;
  };
}

/** A configuration in words: "hybrid, convex 0.5", "hybrid, RRF k=60", "dense". */
function label(config) {
  if (config.retrieval_mode !== "hybrid" || !config.fusion) return config.retrieval_mode;
  return config.fusion === "rrf"
    ? `hybrid, RRF k=${config.rrf_k}`
    : `hybrid, convex ${config.dense_weight}`;
}

const same = (a, b) => label(a) === label(b);

function runTable(items, choose) {
  if (!items.length) return h("p", { class: "muted", id: "no-evaluations", text: "No evaluation yet." });
  return h("table", { class: "grid" },
    h("thead", {}, h("tr", {}, ["When", "Cases", "k", "Best configuration", "nDCG@10",
      `recall@k`].map((t) => h("th", { text: t })))),
    h("tbody", {}, items.map((run) => h("tr", { class: "clickable", dataset: { evaluationId: run.id },
      on: { click: () => choose(run) } },
    h("td", {}, h("a", { href: "#", text: when(run.created_at),
      on: { click: (e) => e.preventDefault() } })),
    h("td", { class: "num", text: run.case_count }),
    h("td", { class: "num", text: run.k }),
    h("td", { text: label(run.best) }),
    h("td", { class: "num", text: fixed(run.best_scores.ndcg_at_10) }),
    h("td", { class: "num", text: fixed(run.best_scores.recall_at_k) })))));
}

function evaluation(run) {
  const best = run.best;
  const settings = { retrieval_mode: best.retrieval_mode };
  if (best.fusion) settings.fusion = best.fusion;
  if (best.fusion === "convex") settings.dense_weight = best.dense_weight;
  if (best.fusion === "rrf") settings.rrf_k = best.rrf_k;
  return h("section", { class: "card", id: `evaluation-${run.id}` },
    h("h2", { text: `Evaluation of ${when(run.created_at)}` }),
    h("p", {}, `${run.case_count} cases, k = ${run.k}. A bot should use `,
      h("strong", { id: "best-config", text: label(best) }),
      ": set its knowledge to ", h("code", { text: JSON.stringify(settings) }), "."),
    h("h3", { text: "Scores per configuration" }),
    h("table", { class: "grid", id: "scores" },
      h("thead", {}, h("tr", {}, ["Configuration", `recall@${run.k}`, "recall@10", "MRR",
        "nDCG@10"].map((t) => h("th", { text: t })))),
      h("tbody", {}, run.tried.map((result) => h("tr", {
        class: same(result.config, best) ? "best" : "",
        dataset: { config: label(result.config) } },
      h("td", { text: label(result.config) }),
      ["recall_at_k", "recall_at_10", "mrr", "ndcg_at_10"].map((key) =>
        h("td", { class: "num", text: fixed(result.scores[key]) })))))),
    h("h3", { text: "Misses" }),
    h("p", { class: "hint", text: "The cases whose expected items were not all in the top k, "
      + "for the best configuration of each retrieval mode, and what came instead." }),
    Object.entries(run.modes).map(([mode, result]) => misses(mode, result, run.k)));
}

function misses(mode, result, k) {
  const count = result.misses.length;
  return h("details", { class: "misses", dataset: { mode }, open: count > 0 && mode !== "sparse" },
    h("summary", { text: `${label(result.config)}: ${count} missed of the cases `
      + `(recall@${k} ${fixed(result.scores.recall_at_k)})` }),
    count === 0 ? h("p", { class: "muted", text: "Nothing missed." }) : h("ol", {},
      result.misses.map((miss) => h("li", { class: "miss" },
        h("div", { class: "miss-query", text: miss.query }),
        h("div", {}, "Missing: ", miss.missing.map((item) =>
          h("code", { class: "missing", text: item }))),
        h("div", { class: "hint", text: miss.returned.length ? "Came instead:"
          : "Nothing came back." }),
        h("ol", { class: "returned" }, miss.returned.map((hit) => h("li", {},
          h("span", { class: "score", text: fixed(hit.score) }), " ",
          h("strong", { text: hit.document_title || hit.document_id }), " — ",
          h("span", { class: "excerpt", text: excerpt(hit.text) }))))))));
}

function excerpt(text, length = 200) {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > length ? `${flat.slice(0, length)}…` : flat;
}

function startForm(path, done) {
  const k = h("input", { id: "eval-k", type: "number", min: 1, max: 10, value: 4 });
  const cases = h("textarea", { id: "eval-cases", rows: 5, spellcheck: "false",
    placeholder: EXAMPLE });
  const run = h("button", { id: "eval-run", type: "submit", text: "Run evaluation" });
  const form = h("form", { id: "eval-form", class: "card" },
    h("h2", { text: "New evaluation" }),
    h("p", { class: "hint", text: "One case a line, as JSON: the query and what a good answer "
      + "holds (document ids of this knowledge base, or text snippets). Every retrieval mode "
      + "and fusion is tried." }),
    field("Cases (JSON Lines)", cases),
    h("div", { class: "row" }, field("k (the hits a bot uses)", k)),
    run);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    let body;
    try {
      body = { k: Number(k.value), cases: parseCases(cases.value) };
    } catch (error) {
      return showError(error);
    }
    run.disabled = true;
    run.textContent = "Running…";
    const result = await attempt(() => call("POST", path, { json: body }));
    run.disabled = false;
    run.textContent = "Run evaluation";
    if (result) done(result);
  });
  return form;
}

/** The cases of a JSON Lines text (blank lines skipped); an InputError naming the bad line. */
function parseCases(text) {
  const cases = [];
  text.split("\n").forEach((line, index) => {
    if (!line.trim()) return;
    let value;
    try {
      value = JSON.parse(line);
    } catch (error) {
      throw new InputError(`Cases, line ${index + 1}: not JSON (${error.message})`);
    }
    if (!value || typeof value !== "object" || Array.isArray(value)) {
      throw new InputError(`Cases, line ${index + 1}: not an object with "query" and "expected"`);
    }
    cases.push(value);
  });
  if (!cases.length) throw new InputError("Cases: write at least one case, one JSON object a line.");
  return cases;
}
