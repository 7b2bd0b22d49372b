// The tenant's knowledge bases: a list and a form to create one.
import { call, seg } from "./api.js";
import { field, fill, h, when } from "./dom.js";
import { attempt, carryNotice, showInfo } from "./notice.js";

export const VISIBILITIES = ["shared", "private", "restricted"];

/** A status as a coloured badge. */
export function badge(status) {
  return h("span", { class: `badge ${status}`, text: status });
}

export function renderKnowledgeBases(main) {
  const list = h("div", { id: "kb-list" }, h("p", { class: "muted", text: "Loading…" }));
  main.append(
    h("h1", { text: "Knowledge bases" }),
    createForm(),
    h("h2", { text: "All knowledge bases" }),
    list,
  );
  attempt(async () => fill(list, table((await call("GET", "/api/v1/knowledge-bases")).items)));
  return () => {};
}

function table(items) {
  if (!items.length) return h("p", { class: "muted", text: "No knowledge base yet." });
  return h("table", { class: "grid" },
    h("thead", {}, h("tr", {},
      ["Name", "Code", "Status", "Documents", "Chunks", "Updated"].map((t) => h("th", { text: t })))),
    h("tbody", {}, items.map((kb) => h("tr", { dataset: { kbId: kb.id } },
      h("td", {}, h("a", { href: `#/kb/${seg(kb.id)}`, class: "kb-link", text: kb.name })),
      h("td", { text: kb.code ?? "" }),
      h("td", {}, badge(kb.status)),
      h("td", { class: "num", text: kb.document_count }),
      h("td", { class: "num", text: kb.chunk_count }),
      h("td", { text: when(kb.updated_at) }),
    ))));
}

function createForm() {
  const name = h("input", { id: "kb-name", required: true, maxlength: 200 });
  const code = h("input", { id: "kb-code", maxlength: 32, placeholder: "handbook" });
  const description = h("textarea", { id: "kb-description", rows: 2, maxlength: 5000 });
  const language = h("input", { id: "kb-language", value: "en", maxlength: 16 });
  const visibility = h("select", { id: "kb-visibility" },
    VISIBILITIES.map((v) => h("option", { value: v, text: v })));
  const submit = h("button", { id: "kb-create", type: "submit", text: "Create" });
  const form = h("form", { id: "kb-create-form", class: "card" },
    h("h2", { text: "New knowledge base" }),
    h("div", { class: "row" },
      field("Name", name),
      field("Code", code, "optional: lowercase letters, digits, dashes"),
      field("Language", language),
      field("Default visibility", visibility)),
    field("Description", description),
    submit);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    submit.disabled = true;
    const body = {
      name: name.value,
      description: description.value,
      default_language: language.value.trim() || "en",
      default_visibility: visibility.value,
    };
    if (code.value.trim()) body.code = code.value.trim();
    const kb = await attempt(() => call("POST", "/api/v1/knowledge-bases", { json: body }));
    submit.disabled = false;
    if (kb) {
      showInfo(`Created knowledge base “${kb.name}”.`);
      carryNotice();
      window.location.hash = `#/kb/${seg(kb.id)}`;
    }
  });
  return form;
}
