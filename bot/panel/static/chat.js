// PinClaw web chat: follows the conversation live (Server-Sent Events from
// /chat/events) and sends without reloading. Plain JavaScript, no build step; the
// page works without it (the forms post and the page comes back).
"use strict";

(() => {
  const log = document.getElementById("chat-log");
  const form = document.getElementById("chat-form");
  if (!log || !form) return;
  const typing = document.getElementById("chat-typing");
  const error = document.getElementById("chat-error");
  const text = form.elements.namedItem("text");
  const nonce = form.elements.namedItem("nonce");
  const csrf = form.elements.namedItem("csrf").value;

  function nearBottom() {
    return window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
  }

  function pressForm(ref, button) {
    const press = document.createElement("form");
    press.className = "inline chat-press";
    press.setAttribute("method", "post");
    press.setAttribute("action", "/chat/press");
    for (const [name, value] of [["csrf", csrf], ["ref", ref]]) {
      const field = document.createElement("input");
      field.type = "hidden";
      field.name = name;
      field.value = value;
      press.append(field);
    }
    const submit = document.createElement("button");
    submit.type = "submit";
    submit.name = "action";
    submit.value = button.action;
    submit.textContent = button.label;
    press.append(submit);
    return press;
  }

  // An entry's HTML is escaped by the server (channels/web/format.py); labels are text.
  function upsert(entry) {
    const follow = nearBottom();
    let element = document.getElementById(`chat-entry-${entry.ref}`);
    if (!element) {
      element = document.createElement("article");
      element.id = `chat-entry-${entry.ref}`;
      element.dataset.ref = entry.ref;
      log.querySelector(".chat-empty")?.remove();
      log.append(element);
    }
    element.className = `chat-entry chat-entry-${entry.kind}${entry.progress ? " progress" : ""}`;
    const body = document.createElement("div");
    body.className = "chat-entry-body";
    body.innerHTML = entry.html;
    const parts = [body];
    if (entry.buttons.length) {
      const actions = document.createElement("div");
      actions.className = "actions";
      for (const button of entry.buttons) actions.append(pressForm(entry.ref, button));
      parts.push(actions);
    }
    element.replaceChildren(...parts);
    if (follow) element.scrollIntoView({ block: "end" });
  }

  // The stream resumes where it left off: the browser sends the id of the last event it
  // got (Last-Event-ID) when it reconnects after a dropped connection. After an answer
  // that is not a stream (a proxy's 502 while PinClaw restarts, say) it gives up for
  // good, and a page restored from the back-forward cache has no stream at all: both
  // open a new one from the last event shown, or the page would wait forever.
  let source = null;
  let last = `${log.dataset.epoch}:${log.dataset.after}`;
  let retryMs = 0;
  let retry = 0;

  function seen(event) {
    if (event.lastEventId) last = event.lastEventId;
    return JSON.parse(event.data);
  }

  function listen() {
    window.clearTimeout(retry);
    source?.close();
    const [epoch, after] = last.split(":");
    const url = `/chat/events?epoch=${encodeURIComponent(epoch)}&after=${encodeURIComponent(after)}`;
    const stream = new EventSource(url);
    source = stream;
    stream.addEventListener("open", () => { retryMs = 0; });
    stream.addEventListener("entry", (event) => upsert(seen(event)));
    stream.addEventListener("remove", (event) => {
      document.getElementById(`chat-entry-${seen(event).ref}`)?.remove();
    });
    stream.addEventListener("typing", (event) => {
      const on = seen(event).on;
      if (typing) typing.hidden = !on;
    });
    stream.addEventListener("reload", () => {
      stream.close();
      window.location.reload();
    });
    stream.addEventListener("error", () => {
      if (stream !== source || stream.readyState !== EventSource.CLOSED) return;
      retryMs = Math.min(30000, retryMs ? retryMs * 2 : 3000);
      retry = window.setTimeout(listen, retryMs);
    });
  }

  window.addEventListener("pageshow", (event) => {
    if (event.persisted) listen();
  });

  async function post(url, data) {
    const response = await fetch(url, {
      method: "POST",
      body: data,
      credentials: "same-origin",
      headers: { "X-Requested-With": "fetch", "X-CSRF-Token": csrf },
    });
    let answer = {};
    try {
      answer = await response.json();
    } catch (problem) {
      answer = { error: `The panel answered ${response.status}; reload the page.` };
    }
    if (!response.ok) throw new Error(answer.error || `The panel answered ${response.status}.`);
    return answer;
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!text.value.trim()) return;
    error.textContent = "";
    const submit = form.querySelector("button[type=submit]");
    submit.disabled = true;
    try {
      const answer = await post(form.getAttribute("action"), new FormData(form));
      text.value = "";
      nonce.value = answer.nonce; // the next message is a new one; a retry of this one is not
    } catch (problem) {
      error.textContent = problem.message;
    } finally {
      submit.disabled = false;
      text.focus();
    }
  });

  // Ctrl+Enter (or Cmd+Enter) sends; Enter alone makes a new line.
  text.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) form.requestSubmit();
  });

  log.addEventListener("submit", async (event) => {
    const press = event.target;
    if (!(press instanceof HTMLFormElement) || !press.classList.contains("chat-press")) return;
    event.preventDefault();
    const data = new FormData(press);
    const button = event.submitter;
    if (button && button.name) data.set(button.name, button.value);
    const buttons = press.closest(".actions")?.querySelectorAll("button") ?? [];
    buttons.forEach((each) => { each.disabled = true; });
    try {
      // getAttribute: the button named "action" hides the form's action property.
      await post(press.getAttribute("action"), data); // the record and answer come as events
    } catch (problem) {
      error.textContent = problem.message;
      buttons.forEach((each) => { each.disabled = false; });
    }
  });

  listen();
  log.lastElementChild?.scrollIntoView({ block: "end" });
})();
