// A knowledge base's retrieval evaluations: the runs, each configuration's scores, the
// configuration a bot should use, the cases missed with what came instead; applying one of
// a run's configurations to a bot or as the KB's default; and a new run.
import { call, seg } from "./api.js";
import { field, fill, fixed, h, when } from "./dom.js";
import { attempt, InputError, showError, showInfo } from "./notice.js";

const EXAMPLE = '{"query": "How long do refunds take?", "expected": ["refunds are paid within"]}';

export function renderEvaluations(container, kb) {
  const path = `/api/v1/knowledge-bases/${seg(kb.id)}/evaluations`;
  const runs = h("div", { id: "evaluation-runs" }, h("p", { class: "muted", text: "Loading…" }));
  const detail = h("div", { id: "evaluation-detail" });
  let left = false;
  // The bots an evaluation of this KB speaks for: those with the KB attached.
  let bots = [];
  const botsLoaded = attempt(() => call("GET", "/api/v1/bots")).then((list) => {
    bots = (list?.items ?? []).filter((bot) => bot.knowledge.kb_ids.includes(kb.id));
  });

  async function load(selectId = null) {
    const [items] = await Promise.all([
      attempt(() => call("GET", path, { query: { limit: 20 } })), botsLoaded]);
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
    fill(detail, evaluation(run, applyForm(kb, run, bots)));
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

/** A configuration in words: "hybrid, convex 0.5", "hybrid, convex per query",
 * "hybrid, RRF k=60", "dense". */
const FUSION_NAMES = { convex: "convex", dbsf: "DBSF", zscore: "z-score", gated: "gated" };

function label(config) {
  if (config.retrieval_mode !== "hybrid" || !config.fusion) return config.retrieval_mode;
  return config.fusion === "rrf"
    ? `hybrid, RRF k=${config.rrf_k}`
    : `hybrid, ${FUSION_NAMES[config.fusion]} ${config.dense_weight ?? "per query"}`;
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

function evaluation(run, apply) {
  const best = run.best;
  const settings = { retrieval_mode: best.retrieval_mode };
  if (best.fusion) settings.fusion = best.fusion;
  if (best.fusion && best.fusion !== "rrf") settings.dense_weight = best.dense_weight;
  if (best.fusion === "rrf") settings.rrf_k = best.rrf_k;
  return h("section", { class: "card", id: `evaluation-${run.id}` },
    h("h2", { text: `Evaluation of ${when(run.created_at)}` }),
    h("p", {}, `${run.case_count} cases, k = ${run.k}. A bot should use `,
      h("strong", { id: "best-config", text: label(best) }),
      ": set its knowledge to ", h("code", { text: JSON.stringify(settings) }), "."),
    h("p", { id: "best-gain", class: run.offered ? "" : "hint", text: gainText(run) }),
    apply,
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

/** Whether the best is a significant gain over the KB's configuration when it was run. */
function gainText(run) {
  const gain = run.gain;
  if (!gain) return "This run keeps no per-case figures, so whether its best is a significant "
    + "gain over the current configuration is not known: run it again.";
  const cases = gain.wins + gain.losses + gain.ties;
  const sign = gain.difference >= 0 ? "+" : "";
  const told = `Against ${label(gain.over)}, what this knowledge base's searches used: nDCG@10 `
    + `${sign}${fixed(gain.difference)}, better in ${gain.wins}, worse in ${gain.losses} and `
    + `alike in ${gain.ties} of ${cases} cases, p = ${fixed(gain.p_value)}. `;
  if (run.offered) return told + "A significant gain: applying it is offered below.";
  if (same(run.best, gain.over)) return told + "The best is the current configuration.";
  return told + "Not a significant gain (that takes p < 0.05): keep the current configuration; the "
    + "best is not offered, though any configuration can still be applied by name.";
}

/** What people's searches of the KB use when they name no mode. */
function kbDefault(kb) {
  return kb.default_retrieval
    ? `${label(kb.default_retrieval)} (applied from an evaluation)`
    : "the service's default (hybrid, convex per query)";
}

/**
 * The Apply control: one of the run's configurations (its best first chosen when it is a
 * significant gain, else the current one) to a bot with
 * the KB attached (its knowledge settings) or as the KB's default for people's searches; the
 * outcome, or the API's refusal, is shown under it.
 */
function applyForm(kb, run, bots) {
  // The best is chosen when it is a significant gain; else the configuration the KB used.
  const chosen = run.offered || !run.current ? run.best : run.current;
  const config = h("select", { id: "apply-config" }, run.tried.map((result, index) =>
    h("option", { value: index, selected: same(result.config, chosen),
      text: `${label(result.config)} (nDCG@10 ${fixed(result.scores.ndcg_at_10)})` })));
  const target = h("select", { id: "apply-target" },
    h("option", { value: "kb", text: "This knowledge base's default (people's searches)" }),
    bots.map((bot) => h("option", { value: `bot:${bot.id}`, text: `Bot ${bot.name} (${bot.id})` })));
  const button = h("button", { id: "apply-run", type: "submit", text: "Apply" });
  const current = h("span", { id: "kb-default-retrieval", text: kbDefault(kb) });
  const outcome = h("p", { id: "apply-result", role: "status", hidden: true });
  const form = h("form", { id: "apply-form", class: "apply" },
    h("h3", { text: "Apply" }),
    h("p", { class: "hint" }, "Write a configuration this run measured to a bot with this "
      + "knowledge base attached (its knowledge settings), or as this knowledge base's default "
      + "for people's searches that name no mode. Now they use: ", current, "."),
    h("div", { class: "row" }, field("Configuration", config), field("To", target), button),
    outcome);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const chosen = run.tried[Number(config.value)].config;
    const body = target.value === "kb"
      ? { target: "kb", config: chosen }
      : { target: "bot", bot_id: target.value.slice("bot:".length), config: chosen };
    button.disabled = true;
    let applied;
    try {
      applied = await call("POST", `/api/v1/knowledge-bases/${seg(kb.id)}/evaluations/`
        + `${seg(run.id)}/apply`, { json: body });
    } catch (error) {
      outcome.className = "error";
      outcome.textContent = error.message;
      outcome.hidden = false;
      showError(error);
      return;
    } finally {
      button.disabled = false;
    }
    const what = applied.target === "kb"
      ? "this knowledge base's default"
      : `bot ${bots.find((bot) => bot.id === applied.bot_id)?.name ?? applied.bot_id}`;
    const text = `Applied ${label(applied.config)} (nDCG@10 ${fixed(applied.scores.ndcg_at_10)}) `
      + `to ${what}: before ${applied.before ? label(applied.before) : "the service's default"}, `
      + `now ${label(applied.after)}.`;
    if (applied.target === "kb") {
      kb.default_retrieval = applied.after;
      current.textContent = kbDefault(kb);
    }
    outcome.className = "ok";
    outcome.textContent = text;
    outcome.hidden = false;
    showInfo(text);
  });
  return form;
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
