// A knowledge base's documents: upload by drag and drop (or a file chooser), each document's
// stage and progress, live while anything moves, and failed documents with why and a re-index.
import { call, seg } from "./api.js";
import { fill, h, size, when } from "./dom.js";
import { badge } from "./kbs.js";
import { attempt, showError, showInfo } from "./notice.js";

// How often the list is read again while a document is on its way.
const POLL_MS = 1000;
// How long a document just uploaded or re-indexed is followed even when the filter hides it.
const WATCH_MS = 120_000;
const FINAL = new Set(["indexed", "failed"]);
const PIPELINE = ["queued", "extracting", "chunking", "embedding", "indexing", "indexed"];
const FILTERS = [["", "All"], ["failed", "Failed"], ["stalled", "Stalled"], ["indexed", "Indexed"],
  ...PIPELINE.slice(0, 5).map((s) => [s, s[0].toUpperCase() + s.slice(1)])];

export function renderDocuments(container, kb, refreshHeader) {
  const path = `/api/v1/knowledge-bases/${seg(kb.id)}/documents`;
  const rows = h("div", { id: "documents" });
  const uploads = h("ul", { id: "uploads", class: "uploads" });
  const live = h("span", { id: "live", class: "muted" });
  const filter = h("select", { id: "doc-filter" },
    FILTERS.map(([value, label]) => h("option", { value, text: label })));
  const input = h("input", { id: "file-input", type: "file", multiple: true, class: "visually-hidden" });
  const zone = h("div", { id: "drop-zone", class: "drop-zone", tabindex: 0 },
    h("strong", { text: "Drop files here to upload them" }),
    h("span", {}, " or ", h("label", { for: "file-input", class: "link", text: "choose files" })),
    h("small", { class: "hint", text: "PDF, DOCX, Markdown, HTML, e-mail, CSV, JSON or text." }),
    input);
  fill(container,
    h("section", { class: "card" }, h("h2", { text: "Upload" }), zone, uploads),
    h("section", {},
      h("div", { class: "toolbar" },
        h("h2", { text: "Documents" }),
        h("label", {}, "Show ", filter),
        h("button", { id: "doc-refresh", type: "button", class: "secondary", text: "Refresh",
          on: { click: () => refresh() } }),
        live),
      rows));

  let left = false;
  let timer = null;
  let inFlight = 0;
  // Documents followed after an upload or re-index: id -> until when.
  const watched = new Map();
  let lastStatus = new Map();
  // Only the latest read of the list is drawn: an older answer arriving late is dropped.
  let reads = 0;

  async function refresh() {
    clearTimeout(timer);
    timer = null;
    const read = ++reads;
    const page = await attempt(() => call("GET", path, { query: { status: filter.value, limit: 50 } }));
    if (left || read !== reads) return;
    if (page) {
      fill(rows, table(page.items));
      const now = Date.now();
      let finished = false;
      for (const doc of page.items) {
        if (FINAL.has(doc.parse_status)) {
          if (watched.delete(doc.id) || (lastStatus.has(doc.id)
              && lastStatus.get(doc.id) !== doc.parse_status)) finished = true;
        }
      }
      for (const [id, until] of watched) if (until < now) watched.delete(id);
      lastStatus = new Map(page.items.map((d) => [d.id, d.parse_status]));
      if (finished) refreshHeader();
      const moving = page.items.some((d) => !FINAL.has(d.parse_status));
      if (moving || watched.size || inFlight) {
        live.textContent = "updating live…";
        timer = setTimeout(refresh, POLL_MS);
        return;
      }
    }
    live.textContent = page ? `as of ${new Date().toLocaleTimeString()}` : "";
  }

  function table(items) {
    if (!items.length) return h("p", { class: "muted", id: "no-documents", text: "No documents." });
    return h("table", { class: "grid" },
      h("thead", {}, h("tr", {}, ["Document", "Status", "Progress", "Chunks", "Size", "Updated",
        "Why it failed", ""].map((t) => h("th", { text: t })))),
      h("tbody", {}, items.map(row)));
  }

  function row(doc) {
    const failed = doc.parse_status === "failed";
    return h("tr", { class: `doc ${doc.parse_status}`,
      dataset: { documentId: doc.id, status: doc.parse_status } },
    h("td", {},
      h("div", { class: "doc-title", text: doc.title || doc.filename }),
      doc.title && doc.title !== doc.filename ? h("small", { class: "muted", text: doc.filename }) : null,
      doc.version > 1 ? h("small", { class: "muted", text: ` v${doc.version}` }) : null),
    h("td", {}, badge(doc.parse_status), doc.stalled ? [" ", badge("stalled")] : null),
    h("td", { class: "progress-cell" }, progress(doc)),
    h("td", { class: "num", text: doc.chunk_count ?? "–" }),
    h("td", { class: "num", text: size(doc.size_bytes) }),
    h("td", { text: when(doc.updated_at) }),
    h("td", { class: "reason", text: failed ? (doc.last_error ?? doc.parse_error ?? "") : "" }),
    h("td", {}, FINAL.has(doc.parse_status)
      ? h("button", { type: "button", class: failed ? "reindex" : "reindex secondary",
        text: "Re-index", on: { click: (event) => reindex(doc, event.currentTarget) } })
      : null));
  }

  async function reindex(doc, button) {
    button.disabled = true;
    const started = await attempt(() => call("POST", `${path}/${seg(doc.id)}/reindex`));
    if (left) return;
    if (!started) {
      button.disabled = false;
      return;
    }
    showInfo(`Re-indexing “${started.title || started.filename}”: ${started.parse_status}.`);
    watched.set(started.id, Date.now() + WATCH_MS);
    refresh();
  }

  async function upload(files) {
    const list = Array.from(files);
    if (!list.length) return;
    inFlight += list.length;
    for (const file of list) {
      const line = h("li", { dataset: { file: file.name } }, h("strong", { text: file.name }),
        h("span", { class: "upload-state", text: " uploading…" }));
      uploads.prepend(line);
      const form = new FormData();
      form.append("file", file, file.name);
      try {
        const doc = await call("POST", path, { form });
        watched.set(doc.id, Date.now() + WATCH_MS);
        line.classList.add("ok");
        line.lastChild.textContent = doc.parse_status === "queued"
          ? ` queued as ${doc.id}`
          : ` already in this knowledge base (${doc.id}, ${doc.parse_status})`;
      } catch (error) {
        line.classList.add("error");
        line.lastChild.textContent = ` refused: ${error.message}`;
        showError(`${file.name}: ${error.message}`);
      } finally {
        inFlight -= 1;
      }
      if (left) return;
      refresh();
    }
  }

  zone.addEventListener("dragenter", (event) => {
    event.preventDefault();
    zone.classList.add("over");
  });
  zone.addEventListener("dragover", (event) => {
    event.preventDefault();
    event.dataTransfer.dropEffect = "copy";
  });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    zone.classList.remove("over");
    upload(event.dataTransfer.files);
  });
  input.addEventListener("change", () => {
    upload(input.files);
    input.value = "";
  });
  filter.addEventListener("change", () => refresh());
  refresh();
  return () => {
    left = true;
    clearTimeout(timer);
  };
}

/** Where a document is: a bar over the pipeline's stages, or over its chunks while embedding. */
function progress(doc) {
  const status = doc.parse_status;
  if (status === "failed") return h("span", { class: "muted", text: "stopped" });
  if (status === "embedding" && doc.chunk_count) {
    return [h("progress", { max: doc.chunk_count, value: doc.chunks_embedded }),
      h("small", { class: "progress-text",
        text: `${doc.chunks_embedded} / ${doc.chunk_count} chunks embedded` })];
  }
  const step = Math.max(0, PIPELINE.indexOf(status));
  return [h("progress", { max: PIPELINE.length - 1, value: step }),
    h("small", { class: "progress-text",
      text: status === "indexed" ? "done" : `${status} (${step + 1} of ${PIPELINE.length})` })];
}
