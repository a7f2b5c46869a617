// Keeps the admin page alive without a library or a build step: every element with
// data-refresh is fetched again every data-interval milliseconds and swapped in when its
// HTML changed. A hidden tab fetches nothing; an ended session stops the refresh.
"use strict";
(function () {
  const status = document.getElementById("refreshed");
  const say = (text) => { if (status) status.textContent = text; };
  for (const region of document.querySelectorAll("[data-refresh]")) {
    let last = null;
    const timer = setInterval(async () => {
      if (document.hidden) return;
      try {
        const response = await fetch(region.dataset.refresh, { redirect: "manual" });
        if (response.type === "opaqueredirect") {
          clearInterval(timer);
          say("signed out: reload the page to sign in again");
          return;
        }
        if (!response.ok) { say(`refresh failed (${response.status}); retrying`); return; }
        const html = await response.text();
        if (html !== last) { region.innerHTML = html; last = html; }
        say(`updated ${new Date().toLocaleTimeString()}`);
      } catch (error) {
        say("refresh failed (server unreachable); retrying");
      }
    }, Number(region.dataset.interval) || 5000);
  }
})();
