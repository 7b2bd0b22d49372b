// The search playground: a bot's search as the agent runtime would get it, with each hit's
// citation, score and rationale, and where the time went.
import { call, seg } from "./api.js";
import { count, field, fill, fixed, h } from "./dom.js";
import { attempt } from "./notice.js";

export function renderPlayground(main) {
  const bots = h("select", { id: "bot-select" });
  const about = h("div", { id: "bot-about", class: "muted" });
  const query = h("input", { id: "query", type: "search", required: true, maxlength: 2000,
    placeholder: "What would a caller ask?" });
  const topK = h("input", { id: "top-k", type: "number", min: 1, max: 10, placeholder: "bot's" });
  const threshold = h("input", { id: "threshold", type: "number", min: 0, max: 1, step: 0.05,
    placeholder: "bot's" });
  const submit = h("button", { id: "search", type: "submit", text: "Search" });
  const results = h("div", { id: "results" });
  const form = h("form", { id: "playground-form", class: "card" },
    field("Bot", bots),
    about,
    field("Query", query),
    h("div", { class: "row" }, field("Top k", topK, "1–10; empty: the bot's"),
      field("Score threshold", threshold, "0–1; empty: the bot's")),
    submit);
  main.append(h("h1", { text: "Search playground" }),
    h("p", { class: "hint", text: "Runs a bot's search exactly as the agent runtime's "
      + "contract does: its attached, active knowledge bases and its knowledge settings." }),
    form, results);

  let left = false;
  let knownBots = [];
  let kbNames = new Map();

  const describe = () => {
    const bot = knownBots.find((b) => b.id === bots.value);
    if (!bot) return fill(about, "No bot: create one with POST /api/v1/bots.");
    const k = bot.knowledge;
    const kbs = k.kb_ids.map((id) => kbNames.get(id) ?? id).join(", ") || "none";
    fill(about, `knowledge ${k.enabled ? "on" : "off"} · KBs: ${kbs} · ${k.retrieval_mode}`
      + (k.retrieval_mode === "hybrid" ? ` (${k.fusion})` : "")
      + ` · top ${k.top_k} · threshold ${k.score_threshold} · ${k.strict ? "strict" : "not strict"}`);
  };

  attempt(async () => {
    const [botList, kbList] = await Promise.all([
      call("GET", "/api/v1/bots"), call("GET", "/api/v1/knowledge-bases")]);
    if (left) return;
    knownBots = botList.items;
    kbNames = new Map(kbList.items.map((kb) => [kb.id, kb.name]));
    fill(bots, knownBots.map((bot) => h("option", { value: bot.id, text: `${bot.name} (${bot.id})` })));
    describe();
  });
  bots.addEventListener("change", describe);

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!bots.value) return;
    const body = { query: query.value };
    if (topK.value) body.top_k = Number(topK.value);
    if (threshold.value) body.score_threshold = Number(threshold.value);
    submit.disabled = true;
    fill(results, h("p", { class: "muted", text: "Searching…" }));
    const answer = await attempt(() =>
      call("POST", `/api/v1/bots/${seg(bots.value)}/search`, { json: body }));
    submit.disabled = false;
    if (left) return;
    fill(results, answer ? rendered(answer) : null);
  });
  return () => {
    left = true;
  };
}

function rendered(answer) {
  const m = answer.metrics;
  const cached = Object.entries(m.cache).filter(([, hit]) => hit).map(([layer]) => layer);
  return [
    h("p", { id: "metrics", class: "metrics" },
      h("span", { id: "total-ms", text: `total ${fixed(m.total_ms, 1)} ms` }), " · ",
      h("span", { text: `query embedding ${fixed(m.embedding_ms, 1)} ms` }), " · ",
      h("span", { text: `ranking ${fixed(m.ranking_ms, 1)} ms` }), " · ",
      h("span", { text: `fetch ${fixed(m.fetch_ms, 1)} ms` }), " · ",
      h("span", { text: `cached: ${cached.join(", ") || "nothing"}` }), " · ",
      h("span", { text: count(answer.hits.length, "hit") })),
    answer.fallback_message
      ? h("p", { id: "fallback", class: "fallback" }, "Nothing passed; the bot would say: ",
        h("q", { text: answer.fallback_message }))
      : null,
    answer.hits.length === 0 && !answer.fallback_message
      ? h("p", { id: "no-hits", class: "muted", text: "No hits." }) : null,
    h("ol", { id: "hits", class: "hits" }, answer.hits.map((hit) => h("li", { class: "hit" },
      h("div", { class: "hit-head" },
        h("span", { class: "score", text: `score ${fixed(hit.score)}` }),
        h("span", { class: "citation", text: hit.citation })),
      h("div", { class: "rationale", text: hit.retrieval_rationale }),
      h("blockquote", { class: "chunk-text", text: hit.chunk_text }),
      hit.also_in.length
        ? h("div", { class: "also-in muted" }, "Also in: ", hit.also_in.map((copy, i) =>
          [i ? ", " : "", `${copy.document_title || copy.source_name}`
            + (copy.page !== null && copy.page !== undefined ? ` p. ${copy.page}` : "")]))
        : null))),
  ];
}
