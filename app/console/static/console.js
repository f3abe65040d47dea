// graphkeep console: the few behaviours htmx does not cover. No network beyond this origin.
"use strict";

function picked() {
  return Array.from(document.querySelectorAll("#tree input.pick:checked")).map((box) => box.value);
}

document.addEventListener("change", (event) => {
  if (!event.target.matches("#tree input.pick")) return;
  const button = document.getElementById("compare");
  if (button) button.disabled = picked().length !== 2;
});

document.addEventListener("click", (event) => {
  const open = event.target.closest("#tree a.open");
  if (open) {
    event.preventDefault();
    document.querySelectorAll("#tree li.selected").forEach((li) => li.classList.remove("selected"));
    open.closest("li").classList.add("selected");
  }
  if (event.target.id === "compare") {
    const [a, b] = picked();
    const thread = event.target.dataset.threadId;
    const url = `${location.pathname.split("/threads/")[0]}/threads/${thread}/diff?a=${a}&b=${b}`;
    window.htmx.ajax("GET", url, "#detail");
  }
});

// The chat pane: each new AI turn follows its run's event stream and shows tokens as they come.
function follow(turn) {
  turn.dataset.started = "1";
  const threadField = document.getElementById("chat-thread");
  if (threadField) threadField.value = turn.dataset.threadId;
  const source = new EventSource(turn.dataset.stream);
  let streamed = false;
  source.addEventListener("messages", (event) => {
    const [chunk] = JSON.parse(event.data);
    if (chunk && (chunk.type === "AIMessageChunk" || chunk.type === "ai") && chunk.content) {
      turn.textContent += typeof chunk.content === "string" ? chunk.content : JSON.stringify(chunk.content);
      streamed = true;
    }
  });
  source.addEventListener("values", (event) => {
    if (streamed) return;
    const values = JSON.parse(event.data);
    const last = (values.messages || []).slice(-1)[0];
    if (last && last.type === "ai") turn.textContent = last.content;
  });
  const done = () => { source.close(); turn.classList.add("done"); };
  source.addEventListener("end", done);
  source.addEventListener("error", done);
}

document.addEventListener("htmx:afterSwap", () => {
  document.querySelectorAll(".turn.ai[data-stream]:not([data-started])").forEach(follow);
  const form = document.getElementById("chat-form");
  if (form) form.querySelector("input[name=message]").value = "";
});
