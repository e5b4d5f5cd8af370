// The approvals page (docs/architecture.md, "The approvals page"): the list
// arrives whole over Server-Sent Events each time it changes; each call is
// answered with a JSON POST that carries the session's CSRF token in a header.
// Everything shown is set as text, never as HTML: arguments are the model's.
"use strict";

const csrf = document.querySelector('meta[name="csrf-token"]').content;
const calls = document.getElementById("calls");
const live = document.getElementById("live");
const none = document.getElementById("none");
const shown = new Map(); // "batch\ncall" -> its article

function idOf(call) {
  return call.batch_id + "\n" + call.call_id;
}

function fill(article, call, list) {
  const text = (selector, value) => {
    article.querySelector(selector).textContent = value;
  };
  text(".tool", call.tool);
  text(".call-id", call.call_id);
  text(".batch-id", call.batch_id);
  text(".reason", call.reason);
  text(".rule", call.rule || "none: the mode and the tool's risk asked");
  text(".workspace", call.workspace || "");
  text(".expires", call.expires_at);
  const original = JSON.stringify(call.arguments, null, 2);
  const area = article.querySelector(".arguments");
  area.value = original;
  area.dataset.original = original;
  if (call.diff) {
    article.querySelector(".diff").hidden = false;
    text(".diff-path", call.diff.path);
    text(".diff-lines", call.diff.lines.join("\n"));
  }
  if (!list.can_answer) {
    article.querySelector(".answers").hidden = true;
    text(".outcome", "Your key may see this call but not answer it (an approver's may).");
  }
  if (!list.may_widen) {
    article.querySelector(".rule-wanted").hidden = true;
  }
  article.dataset.batch = call.batch_id;
  article.dataset.call = call.call_id;
  article.querySelector(".approve").addEventListener("click", () => answer(article, {answer: "approve"}));
  article.querySelector(".remember").addEventListener("click", () => {
    const wanted = article.querySelector(".rule-wanted").value.trim();
    const body = {answer: "approve", remember: article.querySelector(".scope").value};
    if (wanted) body.rule = wanted;
    answer(article, body);
  });
  article.querySelector(".deny").addEventListener("click", () => {
    const reason = article.querySelector(".deny-reason").value.trim();
    answer(article, reason ? {answer: "deny", reason} : {answer: "deny"});
  });
}

function render(list) {
  const seen = new Set();
  for (const call of list.calls) {
    const id = idOf(call);
    seen.add(id);
    if (shown.has(id)) continue; // kept as it is: an edit in progress stays
    const article = document.getElementById("call").content.firstElementChild.cloneNode(true);
    fill(article, call, list);
    shown.set(id, article);
    calls.appendChild(article);
  }
  for (const [id, article] of shown) {
    if (!seen.has(id) && !article.classList.contains("answered")) {
      article.remove();
      shown.delete(id);
    }
  }
  none.hidden = list.calls.length > 0;
}

async function answer(article, body) {
  const area = article.querySelector(".arguments");
  const outcome = article.querySelector(".outcome");
  if (body.answer === "approve" && area.value !== area.dataset.original) {
    try {
      body.arguments = JSON.parse(area.value);
    } catch (error) {
      outcome.textContent = "The arguments are not valid JSON: " + error.message;
      return;
    }
  }
  const path = "/approvals/calls/" + encodeURIComponent(article.dataset.batch) + "/" +
    encodeURIComponent(article.dataset.call);
  for (const button of article.querySelectorAll("button")) button.disabled = true;
  const response = await fetch(path, {
    method: "POST",
    credentials: "same-origin",
    headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf},
    body: JSON.stringify(body),
  });
  const found = await response.json().catch(() => ({}));
  if (response.ok) {
    article.classList.add("answered");
    const remembered = found.remembered ? " and remembered " + found.remembered.rule : "";
    outcome.textContent = found.answer + " by " + found.by + remembered;
    return;
  }
  if (response.status === 401) window.location.assign("/approvals/sign-in");
  outcome.textContent = "Not answered: " + (found.detail || found.title || response.status);
  for (const button of article.querySelectorAll("button")) button.disabled = false;
}

function follow() {
  const source = new EventSource("/approvals/stream");
  source.addEventListener("open", () => { live.textContent = "live: updates as calls wait and end"; });
  source.addEventListener("approvals", (event) => render(JSON.parse(event.data)));
  source.addEventListener("error", () => {
    live.textContent = "reconnecting…";
    if (source.readyState === EventSource.CLOSED) setTimeout(follow, 3000);
  });
}

follow();
