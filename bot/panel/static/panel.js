// PinClaw panel: the few live parts. Plain JavaScript, no build step; every page
// works without it (forms post, pages reload).
"use strict";

// An element with data-refresh="SECONDS" and an id is replaced every SECONDS by the
// element with the same id from a fresh copy of the page (while the tab is visible).
function refreshLive(element) {
  const seconds = Number(element.dataset.refresh);
  if (!element.id || !(seconds > 0)) return;
  window.setInterval(async () => {
    if (document.hidden) return;
    try {
      const response = await fetch(window.location.href, {
        credentials: "same-origin",
        headers: { "X-Requested-With": "fetch" },
      });
      if (!response.ok || response.redirected) return;
      const page = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = page.getElementById(element.id);
      const current = document.getElementById(element.id);
      if (fresh && current && fresh.innerHTML !== current.innerHTML) {
        current.replaceWith(fresh);
      }
    } catch (error) {
      // Offline for a moment: the next tick tries again.
    }
  }, seconds * 1000);
}

// A form with data-confirm="TEXT" asks before it posts.
function confirmForms(root) {
  root.addEventListener("submit", (event) => {
    const form = event.target;
    const question = form instanceof HTMLFormElement ? form.dataset.confirm : undefined;
    if (question && !window.confirm(question)) event.preventDefault();
  });
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-refresh]").forEach(refreshLive);
  confirmForms(document);
});
