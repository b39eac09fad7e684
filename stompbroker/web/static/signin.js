// One sign-in for the broker's pages: the demo (/), the dashboard (/dashboard)
// and the console (/console).  Each page imports this module, which adds the
// links between the three and who is signed in to its header, and a sign-in
// dialog (a user and password, or a bearer token) that every page shares.
//
// The credentials are kept in sessionStorage under one key: they last as long
// as the browser tab, go from page to page within it, and are gone when it
// closes.  They are sent as HTTP Basic or Bearer on calls to /api/ and /stats,
// and as CONNECT's login and passcode on the pages' STOMP connections (a
// browser cannot set headers on a WebSocket handshake).  Never in a URL, never
// in a cookie (the API sets none, so another site cannot borrow them), never
// logged.  Why sessionStorage and not an HttpOnly cookie: docs/security.md,
// "The web pages' sign-in".
//
// The broker's own check is GET /api/whoami: 200 names the user, 401 refuses
// the credentials.  Where there is no API to ask (404) or it answers this
// machine only (403, a broker without --auth), the credentials are kept
// unchecked and the STOMP connection is the judge.
"use strict";

const KEY = "stompbroker.sign-in";
const PAGES = [["./", "demo"], ["dashboard", "dashboard"], ["console", "console"]];
const $ = (id) => document.getElementById(id);

/** The stored credentials: {user, password} or {token}; null when signed out. */
export function credentials() {
  try {
    const value = JSON.parse(sessionStorage.getItem(KEY));
    return value && (value.token || value.user) ? value : null;
  } catch (error) {
    return null;
  }
}

/** Forget the credentials (sign out). */
export function forget() {
  sessionStorage.removeItem(KEY);
}

/** The Authorization header's value for the API, or null when signed out. */
export function authorization(value = credentials()) {
  if (!value) return null;
  if (value.token) return `Bearer ${value.token}`;
  const bytes = new TextEncoder().encode(`${value.user}:${value.password}`);
  return "Basic " + btoa(String.fromCharCode(...bytes));
}

/** The headers of a STOMP CONNECT that logs in with the stored credentials. */
export function connectHeaders(value = credentials()) {
  if (!value) return {};
  if (value.token) return { passcode: value.token };
  return { login: value.user, passcode: value.password };
}

/** Headers for a fetch of /api/ or /stats: the credentials, and no browser prompt on a 401. */
export function apiHeaders(value = credentials()) {
  const headers = { "X-Requested-With": "stompbroker-console" };
  const header = authorization(value);
  if (header) headers.Authorization = header;
  return headers;
}

/** Whether a STOMP ERROR says that the login was refused. */
export function isLoginRefused(frame) {
  return /^login failed|^credentials (expired|refused)/.test(frame.headers.message || "");
}

/** Ask the broker who the credentials are: {status, answer}. */
export async function whoami(value = credentials()) {
  const response = await fetch("api/whoami", {
    headers: apiHeaders(value), credentials: "omit", cache: "no-store",
  });
  let answer = null;
  try {
    answer = await response.json();
  } catch (error) {
    answer = null;
  }
  return { status: response.status, answer };
}

// The token's subject, to show who is signed in; the broker checks the token, not this.
function tokenSubject(token) {
  try {
    const payload = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(payload)).sub || "token";
  } catch (error) {
    return "token";
  }
}

function element(tag, properties, ...children) {
  const made = Object.assign(document.createElement(tag), properties);
  made.append(...children);
  return made;
}

let pending = null; // the resolve of the sign-in dialog open now

function buildDialog() {
  const field = (label, input) => element("label", {}, label, input);
  const form = element("form", { id: "login", method: "dialog", autocomplete: "off" },
    element("h2", { textContent: "Sign in" }),
    element("p", { className: "hint", textContent:
      "An --auth user and password, or a bearer token (--auth jwt:...). " +
      "The demo, the dashboard and the console of this tab share it until the tab closes." }),
    field("User", element("input", { id: "user", name: "user", autocomplete: "username" })),
    field("Password", element("input", {
      id: "password", name: "password", type: "password", autocomplete: "current-password" })),
    field("Or a bearer token", element("input", {
      id: "token", name: "token", type: "password", autocomplete: "off" })),
    element("p", { id: "login-error", className: "error", role: "alert" }),
    element("div", { className: "buttons" },
      element("button", { id: "sign-in-cancel", type: "button", textContent: "Cancel" }),
      element("button", { id: "sign-in", type: "submit", textContent: "Sign in" })));
  const dialog = element("dialog", { id: "sign-in-dialog" }, form);
  document.body.appendChild(dialog);
  form.addEventListener("submit", submit);
  $("sign-in-cancel").addEventListener("click", () => dialog.close());
  dialog.addEventListener("close", () => {
    if (pending) {
      const resolve = pending;
      pending = null;
      resolve(credentials());
    }
  });
}

async function submit(event) {
  event.preventDefault();
  const token = $("token").value.trim();
  const value = token ? { token } : { user: $("user").value, password: $("password").value };
  if (!token && !value.user) {
    $("login-error").textContent = "a user name, or a bearer token";
    return;
  }
  const { status, answer } = await whoami(value);
  if (status === 401) {
    $("login-error").textContent = answer ? `${answer.error}: ${answer.detail}` : "login failed";
    return;
  }
  $("password").value = "";
  $("token").value = "";
  $("login-error").textContent = "";
  sessionStorage.setItem(KEY, JSON.stringify(value));
  await showWho();
  $("sign-in-dialog").close();
}

/**
 * Open the sign-in dialog.
 * @param message why it opens (a refusal the page met), shown above the fields.
 * @returns a Promise of the credentials signed in with, or null if cancelled.
 */
export function signIn(message = "") {
  $("login-error").textContent = message;
  const dialog = $("sign-in-dialog");
  if (!dialog.open) dialog.showModal();
  return new Promise((resolve) => {
    const earlier = pending;
    pending = (value) => {
      if (earlier) earlier(value);
      resolve(value);
    };
  });
}

let authRequired = null; // what /api/whoami said of --auth: true, false, or null (unknown)

/** Show who is signed in, and the Sign in or Sign out button, in the header. */
export async function showWho() {
  const value = credentials();
  const name = value ? (value.token ? tokenSubject(value.token) : value.user) : null;
  let answer = null;
  try {
    const asked = await whoami(value);
    answer = asked.answer;
    if (asked.status === 200) authRequired = answer.auth;
    else if (asked.status === 403) authRequired = false;
  } catch (error) {
    answer = null;
  }
  const who = $("who");
  if (authRequired === false) {
    who.textContent = answer && answer.user ? answer.user : "no sign-in needed";
  } else {
    who.textContent = name ? `signed in as ${name}` : "not signed in";
  }
  who.dataset.user = name || "";
  $("sign-out").hidden = !value;
  $("sign-in-open").hidden = Boolean(value) || authRequired === false;
}

/**
 * Add the links between the pages, who is signed in and the sign-in dialog.
 * @param current the page's name: "demo", "dashboard" or "console".
 * @param onSignedIn called with the credentials after a sign-in from the header's button.
 */
export function mountSignIn(current, onSignedIn = () => undefined) {
  const links = PAGES.map(([href, name]) => element("a", {
    href, textContent: name, className: name === current ? "current" : "",
  }));
  const signInButton = element("button", { id: "sign-in-open", type: "button", textContent: "Sign in" });
  const signOutButton = element("button", { id: "sign-out", type: "button", textContent: "Sign out" });
  const nav = element("nav", { id: "pages" }, ...links,
    element("span", { id: "who" }), signInButton, signOutButton);
  document.querySelector("header").appendChild(nav);
  buildDialog();
  signInButton.addEventListener("click", async () => {
    const value = await signIn();
    if (value) onSignedIn(value);
  });
  signOutButton.addEventListener("click", () => {
    forget();
    location.reload();
  });
  showWho();
}
