// The console's entry point: log in and out, and show the view the address names
// (#/kbs, #/kb/<id>/<tab>, #/playground, #/model).
import { call, onRefusedToken, session } from "./api.js";
import { renderGenerations } from "./generations.js";
import { renderKnowledgeBase } from "./kb.js";
import { renderKnowledgeBases } from "./kbs.js";
import { clearNotice, leaveNotice, showError } from "./notice.js";
import { renderPlayground } from "./playground.js";

const $ = (id) => document.getElementById(id);
// What the view on screen must stop (its polling) when another replaces it.
let leaveView = () => {};

function showLogin(message = "") {
  leaveView();
  leaveView = () => {};
  $("app-view").hidden = true;
  $("login-view").hidden = false;
  const error = $("login-error");
  error.textContent = message;
  error.hidden = !message;
  $("token").focus();
}

async function logIn(event) {
  event.preventDefault();
  const token = $("token").value.trim();
  if (!token) return;
  $("login-button").disabled = true;
  session.remember(token);
  try {
    // Any call with the token says whether it is valid; this one every role may make.
    await call("GET", "/api/v1/knowledge-bases");
    $("token").value = "";
    showApp();
  } catch (error) {
    session.forget();
    showLogin(`Log in failed: ${error.message}`);
  } finally {
    $("login-button").disabled = false;
  }
}

function logOut() {
  session.forget();
  clearNotice();
  window.location.hash = "";
  showLogin();
}

function showApp() {
  $("login-view").hidden = true;
  $("app-view").hidden = false;
  if (!window.location.hash || window.location.hash === "#") window.location.hash = "#/kbs";
  else route();
}

function route() {
  if (!session.token()) return showLogin();
  leaveView();
  leaveView = () => {};
  leaveNotice();
  const parts = window.location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const main = $("main");
  main.replaceChildren();
  for (const link of document.querySelectorAll("[data-nav]")) {
    link.classList.toggle("active", link.dataset.nav === (parts[0] === "kb" ? "kbs" : parts[0]));
  }
  try {
    if (parts[0] === "kb" && parts[1]) {
      leaveView = renderKnowledgeBase(main, parts[1], parts[2] || "documents");
    } else if (parts[0] === "playground") {
      leaveView = renderPlayground(main);
    } else if (parts[0] === "model") {
      leaveView = renderGenerations(main);
    } else {
      leaveView = renderKnowledgeBases(main);
    }
  } catch (error) {
    showError(error);
  }
}

function start() {
  $("login-form").addEventListener("submit", logIn);
  $("logout").addEventListener("click", logOut);
  $("notice-close").addEventListener("click", clearNotice);
  window.addEventListener("hashchange", route);
  onRefusedToken((error) => {
    session.forget();
    showLogin(`The API refused the token: ${error.message}. Log in again.`);
  });
  if (session.token()) showApp();
  else showLogin();
}

start();
