// Building the page from data: every value goes in as text (textContent, attributes), never as
// markup, so nothing the API returns can run or restyle the page.

/**
 * An element: `h("a", {href: "#/kbs", class: "x", on: {click: f}}, "text", child, [more])`.
 * Props: `class`, `text`, `dataset` (object), `on` (event handlers), `hidden`, `disabled`,
 * `value`, `checked`, `selected`; any other prop is set as an attribute. Children are nodes
 * or strings (as text); null, undefined and false are skipped; arrays are flattened.
 */
export function h(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = String(value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key === "on") {
      for (const [event, handler] of Object.entries(value)) node.addEventListener(event, handler);
    } else if (["hidden", "disabled", "checked", "selected", "required"].includes(key)) {
      node[key] = Boolean(value);
    } else if (key === "value") node.value = String(value);
    else node.setAttribute(key, String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(node, child);
    else node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces a node's children. */
export function fill(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

/** A date and time as the reader's locale writes it ("" for none). */
export function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "";
}

/** A number with a fixed count of decimals ("–" for none). */
export function fixed(value, digits = 3) {
  return typeof value === "number" ? value.toFixed(digits) : "–";
}

/** A byte count as KB or MB. */
export function size(bytes) {
  if (bytes >= 1024 * 1024) return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
  if (bytes >= 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${bytes} B`;
}

/** A labelled form field: the label, then the control. */
export function field(label, control, hint = null) {
  return h("label", { class: "field" }, h("span", { text: label }), control,
    hint ? h("small", { class: "hint", text: hint }) : null);
}

/** A count and its noun: "1 chunk", "3 chunks". */
export function count(n, noun, plural = `${noun}s`) {
  return `${n} ${n === 1 ? noun : plural}`;
}
