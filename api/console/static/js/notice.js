// One line at the top of the page says how the last action went: an API error with its
// message, or what was done.
import { ApiError } from "./api.js";

const box = () => document.getElementById("notice");

/** Input the page refuses before sending anything (a malformed line, a missing field). */
export class InputError extends Error {
  constructor(message) {
    super(message);
    this.name = "InputError";
  }
}

/** Shows an error: the API's message and status, or the error's own message. */
export function showError(error) {
  show(error instanceof Error ? error.message : String(error), "error");
  // A fault of the page itself, not a refusal: worth a trace in the browser's console.
  const expected = error instanceof ApiError || error instanceof InputError;
  if (error instanceof Error && !expected) console.error(error);
}

/** Shows what an action did. */
export function showInfo(text) {
  show(text, "info");
}

export function clearNotice() {
  box().hidden = true;
  carried = false;
}

// Set when an action's outcome is to stay up through the navigation the action starts.
let carried = false;

/** Keeps the notice on screen through the next change of view. */
export function carryNotice() {
  carried = true;
}

/** A new view: the last one's notice goes, unless it was carried over to this one. */
export function leaveNotice() {
  if (!carried) box().hidden = true;
  carried = false;
}

function show(text, kind) {
  const node = box();
  node.className = kind;
  node.setAttribute("role", kind === "error" ? "alert" : "status");
  document.getElementById("notice-text").textContent = text;
  node.hidden = false;
}

/** Runs an action, showing its error if it fails; resolves to its result (undefined on error). */
export async function attempt(action) {
  try {
    return await action();
  } catch (error) {
    showError(error);
    return undefined;
  }
}
