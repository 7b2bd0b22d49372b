// One knowledge base: its figures, and tabs for its documents, its evaluations and its
// settings (edit, disable, enable).
import { call, seg } from "./api.js";
import { count, field, fill, h } from "./dom.js";
import { renderDocuments } from "./documents.js";
import { renderEvaluations } from "./evaluations.js";
import { badge, VISIBILITIES } from "./kbs.js";
import { attempt, showInfo } from "./notice.js";

const TABS = { documents: "Documents", evaluations: "Evaluations", settings: "Settings" };

export function renderKnowledgeBase(main, kbId, tab) {
  const header = h("div", { id: "kb-header" });
  const body = h("div", { id: "kb-body" });
  const base = `#/kb/${seg(kbId)}`;
  main.append(
    h("p", {}, h("a", { href: "#/kbs", text: "← Knowledge bases" })),
    header,
    h("nav", { class: "tabs" }, Object.entries(TABS).map(([key, label]) =>
      h("a", { href: `${base}/${key}`, class: key === tab ? "active" : "", dataset: { tab: key },
        text: label }))),
    body,
  );
  let left = false;
  let leaveTab = () => {};
  const refreshHeader = async () => {
    const kb = await attempt(() => call("GET", `/api/v1/knowledge-bases/${seg(kbId)}`));
    if (kb && !left) fill(header, summary(kb));
    return kb;
  };
  refreshHeader().then((kb) => {
    if (!kb || left) return;
    if (tab === "evaluations") leaveTab = renderEvaluations(body, kb);
    else if (tab === "settings") fill(body, settingsForm(kb, refreshHeader));
    else leaveTab = renderDocuments(body, kb, refreshHeader);
  });
  return () => {
    left = true;
    leaveTab();
  };
}

function summary(kb) {
  return h("div", { class: "kb-summary" },
    h("h1", {}, h("span", { id: "kb-title", text: kb.name }), " ", badge(kb.status)),
    kb.description ? h("p", { id: "kb-description-text", text: kb.description }) : null,
    h("p", { class: "muted" },
      `${count(kb.document_count, "document")} · ${count(kb.chunk_count, "chunk")}`
      + ` · language ${kb.default_language}`
      + ` · uploads ${kb.default_visibility} · id ${kb.id}` + (kb.code ? ` · code ${kb.code}` : "")));
}

function settingsForm(kb, refreshHeader) {
  const name = h("input", { id: "edit-name", value: kb.name, required: true, maxlength: 200 });
  const code = h("input", { id: "edit-code", value: kb.code ?? "", maxlength: 32 });
  const description = h("textarea", { id: "edit-description", rows: 3, maxlength: 5000 });
  description.value = kb.description;
  const language = h("input", { id: "edit-language", value: kb.default_language });
  const visibility = h("select", { id: "edit-visibility" }, VISIBILITIES.map((v) =>
    h("option", { value: v, text: v, selected: v === kb.default_visibility })));
  const save = h("button", { id: "kb-save", type: "submit", text: "Save" });
  const form = h("form", { id: "kb-edit-form", class: "card" },
    h("h2", { text: "Settings" }),
    h("div", { class: "row" }, field("Name", name), field("Code", code),
      field("Language", language), field("Default visibility", visibility)),
    field("Description", description),
    save);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const changes = {};
    if (name.value !== kb.name) changes.name = name.value;
    if (description.value !== kb.description) changes.description = description.value;
    if (language.value !== kb.default_language) changes.default_language = language.value;
    if (visibility.value !== kb.default_visibility) changes.default_visibility = visibility.value;
    if (code.value.trim() && code.value.trim() !== (kb.code ?? "")) changes.code = code.value.trim();
    if (!Object.keys(changes).length) return showInfo("Nothing to save.");
    save.disabled = true;
    const updated = await attempt(() =>
      call("PATCH", `/api/v1/knowledge-bases/${seg(kb.id)}`, { json: changes }));
    save.disabled = false;
    if (updated) {
      Object.assign(kb, updated);
      showInfo(`Saved “${updated.name}”.`);
      refreshHeader();
    }
  });
  return [form, statusCard(kb, refreshHeader)];
}

function statusCard(kb, refreshHeader) {
  const card = h("div", { id: "kb-status-card", class: "card" });
  const draw = () => {
    const active = kb.status === "active";
    const button = h("button", {
      id: active ? "kb-disable" : "kb-enable",
      type: "button",
      class: active ? "danger" : "",
      text: active ? "Disable" : "Enable",
    });
    button.addEventListener("click", async () => {
      if (active && !window.confirm(`Disable “${kb.name}”? Its passages leave search at once.`)) {
        return;
      }
      button.disabled = true;
      const changed = await attempt(() => active
        ? call("DELETE", `/api/v1/knowledge-bases/${seg(kb.id)}`)
        : call("PATCH", `/api/v1/knowledge-bases/${seg(kb.id)}`, { json: { status: "active" } }));
      button.disabled = false;
      if (changed) {
        Object.assign(kb, changed);
        showInfo(`“${kb.name}” is ${kb.status}.`);
        refreshHeader();
        draw();
      }
    });
    fill(card,
      h("h2", { text: "Status" }),
      h("p", {}, "This knowledge base is ", badge(kb.status), active
        ? ". Disabling it takes its passages out of search at once; nothing is deleted."
        : ". Its documents are kept; enabling it puts them back in search."),
      button);
  };
  draw();
  return card;
}
