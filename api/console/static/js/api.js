// The REST API, same origin, with the token of this tab's session. Every refusal becomes an
// ApiError carrying the API's own message (`detail`) and status.

const TOKEN_KEY = "ragline.console.token";

/** An answer of the API other than a success, or no answer at all (status 0). */
export class ApiError extends Error {
  constructor(status, detail) {
    super(status ? `${detail} (HTTP ${status})` : detail);
    this.name = "ApiError";
    this.status = status;
    this.detail = detail;
  }
}

/** The token kept for this tab (sessionStorage: gone when the tab closes or on log out). */
export const session = {
  token: () => sessionStorage.getItem(TOKEN_KEY),
  remember: (token) => sessionStorage.setItem(TOKEN_KEY, token),
  forget: () => sessionStorage.removeItem(TOKEN_KEY),
};

let refused = () => {};

/** What to do when the API refuses the token (401): the app shows the login again. */
export function onRefusedToken(handler) {
  refused = handler;
}

/**
 * Calls the API: `call("GET", "/api/v1/knowledge-bases", {query: {...}})`, `{json: body}` for a
 * JSON body, `{form: FormData}` for a multipart upload. Resolves to the parsed JSON (null for
 * an empty answer); rejects with an ApiError.
 */
export async function call(method, path, { json, form, query } = {}) {
  const url = new URL(path, window.location.origin);
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(key, value);
  }
  const headers = { Accept: "application/json" };
  const token = session.token();
  if (token) headers.Authorization = `Bearer ${token}`;
  let body;
  if (json !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(json);
  } else if (form !== undefined) {
    body = form;
  }
  let response;
  try {
    response = await fetch(url, { method, headers, body, cache: "no-store" });
  } catch (error) {
    throw new ApiError(0, `the API could not be reached: ${error.message}`);
  }
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!response.ok) {
    const error = new ApiError(response.status, messageOf(data, text, response));
    if (response.status === 401) refused(error);
    throw error;
  }
  return data;
}

function messageOf(data, text, response) {
  if (data && typeof data.detail === "string" && data.detail) return data.detail;
  if (data && data.detail !== undefined) return JSON.stringify(data.detail);
  return text.trim() || response.statusText || "the request failed";
}

/** A path segment, escaped. */
export const seg = (value) => encodeURIComponent(value);
