// The vector store's generations (one per embedding model): their models and states, a build's
// progress (polled while one runs), and changing the model (the deployment's admin token).
import { call, seg } from "./api.js";
import { field, fill, h, when } from "./dom.js";
import { badge } from "./kbs.js";
import { attempt, showInfo } from "./notice.js";

const POLL_MS = 2000;
const PROVIDERS = ["local", "gemini", "hashed"];

/** A model as the API and logs name it: provider:model/dimensions. */
function label(model) {
  if (model.model) return `${model.provider}:${model.model}/${model.dimensions}`;
  if (model.provider === "local") return `local:packaged/${model.dimensions}`;
  return `${model.provider}/${model.dimensions}`;
}

/** A build's progress as words: copied of the total, rate, time left; then the checks. */
function progress(item) {
  const { generation, seconds_left: left } = item;
  if (generation.state !== "building") return "";
  const p = generation.progress;
  const copied = `${p.done.toLocaleString()} of ${p.total.toLocaleString()} chunks copied`;
  if (p.copied) return `${copied}; check pass ${p.check_pass}, ${p.mended} mended`;
  const rest = left === null ? "" : `, about ${Math.ceil(left / 60)} min left`;
  return `${copied} at ${Math.round(p.rate_per_s)}/s${rest}`;
}

export function renderGenerations(main) {
  const list = h("div", { id: "generation-list" }, h("p", { class: "muted", text: "Loading…" }));
  main.append(
    h("h1", { text: "Embedding model" }),
    h("p", { class: "muted", text:
      "Searches rank against the live generation with its own model. A new model is built " +
      "beside it from the chunks already made, and searches switch when it is complete." }),
    list,
    startForm(() => refresh()),
  );
  let timer = null;
  async function refresh() {
    const items = await attempt(async () => (await call("GET", "/api/v1/generations")).items);
    if (!items) return;
    fill(list, table(items, refresh));
    clearTimeout(timer);
    if (items.some((item) => item.generation.state === "building")) {
      timer = setTimeout(refresh, POLL_MS);
    }
  }
  refresh();
  return () => clearTimeout(timer);
}

function table(items, refresh) {
  return h("table", { class: "grid", id: "generations" },
    h("thead", {}, h("tr", {},
      ["Generation", "State", "Model", "Progress", "Live since", ""].map((t) => h("th", { text: t })))),
    h("tbody", {}, items.map((item) => {
      const g = item.generation;
      return h("tr", { dataset: { generation: g.number } },
        h("td", { class: "num", text: g.number }),
        h("td", {}, badge(g.state)),
        h("td", { text: label(g.model) }),
        h("td", { class: "progress", text: progress(item) }),
        h("td", { text: when(g.live_since) }),
        h("td", {}, action(g, refresh)));
    })));
}

function action(generation, refresh) {
  const verbs = { building: "cancel", retired: "drop" };
  const verb = verbs[generation.state];
  if (!verb) return null;
  return h("button", { type: "button", class: "secondary", text: verb === "cancel" ? "Cancel" : "Drop now",
    on: { click: async () => {
      const done = await attempt(() =>
        call("POST", `/api/v1/generations/${seg(String(generation.number))}/${verb}`));
      if (done) showInfo(`Generation ${generation.number}: ${done.generation.state}.`);
      refresh();
    } } });
}

function startForm(refresh) {
  const provider = h("select", { id: "model-provider" },
    PROVIDERS.map((p) => h("option", { value: p, text: p })));
  const model = h("input", { id: "model-name", placeholder: "empty: the packaged local model" });
  const dimensions = h("input", { id: "model-dimensions", type: "number", min: 1, value: 384, required: true });
  const submit = h("button", { id: "model-start", type: "submit", text: "Build and switch" });
  const form = h("form", { id: "model-form", class: "card" },
    h("h2", { text: "Change the model" }),
    h("div", { class: "row" },
      field("Provider", provider),
      field("Model", model),
      field("Dimensions", dimensions)),
    submit);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    submit.disabled = true;
    const body = { provider: provider.value, model: model.value.trim(), dimensions: Number(dimensions.value) };
    const started = await attempt(() => call("POST", "/api/v1/generations", { json: body }));
    submit.disabled = false;
    if (started) {
      showInfo(`Generation ${started.generation.number} is being built for ${label(started.generation.model)}.`);
      refresh();
    }
  });
  return form;
}
