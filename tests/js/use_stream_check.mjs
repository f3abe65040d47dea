// Renders a real React component that calls `useStream` (@langchain/react) into a jsdom
// document and drives it against a live graphkeep, over SSE and over WebSocket.
//
//   node use_stream_check.mjs --url http://127.0.0.1:8123 [--transport sse|websocket|both]
//
// Prints ONE JSON object on stdout: {versions, transports: {sse: {...}, websocket: {...}}}.
// Each scenario reports what the component rendered and what crossed the wire; the caller
// (tests/e2e/test_js_use_stream.py) asserts it. A scenario that times out or throws reports
// {failure} (its message holds the last rendered snapshot) instead of failing silently; the
// exit code is 1 when any scenario failed.
//
// Scenarios, each over both transports: chat (submit, values, token-by-token messages, threadId
// minted), interrupt (stream.interrupt, respond), hydrate_finished / hydrate_interrupted (a new
// component on an existing thread), reconnect (streams cut mid-run), stop, failure, subgraph (a
// card per discovered subgraph, with useValues scoped to its namespace).
// The graphs are the test suite's (tests/graphs/langgraph.json): `chat` echoes the last human
// message token by token ("echo <text>"), `asker` interrupts with {"question": ...} and then
// answers "<resume>!", `steps` runs a, b (sleeping `sleep` s), c, `failing` raises, `nested`
// runs parent_step then the subgraph node `child`.
import { createRequire } from "node:module";
import { parseArgs } from "node:util";

import { JSDOM } from "jsdom";
import WebSocket from "ws";

const require = createRequire(import.meta.url);
const { values: args } = parseArgs({
  options: {
    url: { type: "string" },
    transport: { type: "string", default: "both" },
    timeout: { type: "string", default: "20000" },
  },
});
if (!args.url) {
  console.error("usage: node use_stream_check.mjs --url http://host:port [--transport sse|websocket|both]");
  process.exit(2);
}
const API_URL = args.url.replace(/\/$/, "");
const TIMEOUT_MS = Number(args.timeout);
const PACE_MS = 2; // between SSE frames handed to the hook (see tapSse)

// A browser-like global environment for react-dom: jsdom's window and document. fetch stays
// Node's own (jsdom has none), as it would be the browser's in a real page.
const dom = new JSDOM("<!doctype html><html><body></body></html>", { url: "http://localhost/" });
globalThis.window = dom.window;
globalThis.document = dom.window.document;
for (const name of ["HTMLElement", "Node", "Element", "Text", "MutationObserver"]) {
  globalThis[name] = dom.window[name];
}
if (typeof globalThis.navigator === "undefined") {
  // Node 21+ has its own navigator; Node 20 has none and react-dom reads userAgent
  globalThis.navigator = dom.window.navigator;
}

const React = await import("react");
const { createRoot } = await import("react-dom/client");
const { useStream, useValues } = await import("@langchain/react");
const h = React.createElement;

const versions = Object.fromEntries(
  ["@langchain/react", "@langchain/langgraph-sdk", "@langchain/core", "react", "react-dom", "jsdom", "ws"].map(
    (name) => [name, require(`${name}/package.json`).version],
  ),
);

// ---------------------------------------------------------------------------------------------
// Wire capture: every protocol event the hook received, by transport. SSE goes through the
// `fetch` option, WebSocket through the `webSocketFactory` option (Node 20 has no global
// WebSocket without a flag; `ws` is what jsdom itself uses). `cut()` drops every open stream
// the way a network failure would, to check the hook's reconnect.

// The complete SSE frames at the head of `buffer` (CRLF already folded to LF), each with its
// `data:` payload parsed (null for a frame without one, e.g. a heartbeat), and what is left.
function takeFrames(buffer) {
  const frames = [];
  let end;
  while ((end = buffer.indexOf("\n\n")) >= 0) {
    const frame = buffer.slice(0, end);
    buffer = buffer.slice(end + 2);
    const data = frame
      .split("\n")
      .filter((line) => line.startsWith("data:"))
      .map((line) => line.slice(5).trimStart())
      .join("\n");
    frames.push({ frame, event: data ? JSON.parse(data) : null });
  }
  return { frames, rest: buffer };
}

function makeWire() {
  const wire = { events: [], commands: [], sse_since: [], sockets: 0, streams: 0, cuts: 0 };
  const open = new Set(); // () => void, one per open stream: cuts it

  // The hook reads the body through this stream; each chunk is parsed for the tap before the
  // hook sees it, so the tap is never behind the hook.
  function tapSse(body, stream) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    const encoder = new TextEncoder();
    let buffer = "";
    let drop;
    return new ReadableStream({
      start(controller) {
        drop = () => {
          open.delete(drop);
          reader.cancel().catch(() => {});
          controller.error(new TypeError("network error (cut by the test)"));
        };
        open.add(drop);
      },
      async pull(controller) {
        let chunk;
        try {
          chunk = await reader.read();
        } catch (error) {
          open.delete(drop);
          controller.error(error);
          return;
        }
        if (!open.has(drop)) return; // cut meanwhile
        if (chunk.done) {
          open.delete(drop);
          controller.close();
          return;
        }
        buffer += decoder.decode(chunk.value, { stream: true }).replaceAll("\r\n", "\n");
        const taken = takeFrames(buffer);
        buffer = taken.rest;
        for (const { frame, event } of taken.frames) {
          if (event) wire.events.push({ ...event, stream });
          // one frame at a time, a little apart, as over a real network: on loopback a whole
          // run's frames come in one chunk and React renders only the end of them
          controller.enqueue(encoder.encode(`${frame}\n\n`));
          await new Promise((resolve) => setTimeout(resolve, PACE_MS));
        }
      },
      cancel() {
        open.delete(drop);
        return reader.cancel();
      },
    });
  }

  const fetchCapture = async (input, init) => {
    const url = typeof input === "string" ? input : input.url;
    if (url.endsWith("/commands") && init?.body) wire.commands.push(JSON.parse(init.body).method);
    if (url.endsWith("/stream/events") && init?.body) wire.sse_since.push(JSON.parse(init.body).since ?? null);
    const response = await fetch(input, init);
    if (!url.endsWith("/stream/events") || !response.body) return response;
    wire.streams += 1;
    const body = tapSse(response.body, `sse-${wire.streams}`);
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  };

  const webSocketFactory = (url) => {
    wire.sockets += 1;
    const stream = `ws-${wire.sockets}`;
    const socket = new WebSocket(url);
    const send = socket.send.bind(socket);
    socket.send = (data) => {
      const frame = JSON.parse(String(data));
      if (frame.method) wire.commands.push(frame.method);
      return send(data);
    };
    socket.addEventListener("message", (message) => {
      const frame = JSON.parse(String(message.data));
      if (frame.type === "event") wire.events.push({ ...frame, stream });
    });
    const drop = () => {
      open.delete(drop);
      socket.terminate(); // no close frame: the hook sees 1006, as on a lost connection
    };
    open.add(drop);
    socket.addEventListener("close", () => open.delete(drop));
    return socket;
  };

  const cut = () => {
    wire.cuts += open.size;
    for (const drop of [...open]) drop();
  };
  return { wire, fetchCapture, webSocketFactory, cut };
}

// ---------------------------------------------------------------------------------------------
// The component under test and a harness that waits on what it rendered.

// BaseMessage.text joins a message's text content blocks (the graphs' AI messages carry
// [{type: "text", text}] blocks, output_version v1)
function plainMessages(messages) {
  return (messages ?? []).map((m) => ({ type: m.type, text: m.text }));
}

function snapshotOf(stream) {
  return {
    values: stream.values ?? null,
    messages: plainMessages(stream.messages),
    isLoading: stream.isLoading,
    isThreadLoading: stream.isThreadLoading,
    threadId: stream.threadId ?? null,
    interrupt: stream.interrupt ? { id: stream.interrupt.id ?? null, value: stream.interrupt.value } : null,
    interrupts: (stream.interrupts ?? []).length,
    error: stream.error == null ? null : String(stream.error?.message ?? stream.error),
  };
}

// A card per discovered subgraph, showing its own values through the scoped selector hook
// (a subscription of its own, filtered by namespace on the server).
function SubgraphCard({ stream, subgraph, harness }) {
  const values = useValues(stream, subgraph);
  React.useEffect(() => {
    harness.scoped.push({ node: subgraph.nodeName, depth: subgraph.namespace.length, status: subgraph.status, values: values ?? null });
  });
  return h("section", { className: "subgraph", "data-node": subgraph.nodeName }, JSON.stringify(values ?? null));
}

function Probe({ options, harness }) {
  const stream = useStream(options);
  harness.stream = stream;
  React.useEffect(() => harness.rendered(snapshotOf(stream)));
  return h(
    "main",
    null,
    [...stream.subgraphs.values()].map((sg) => h(SubgraphCard, { key: sg.id, stream, subgraph: sg, harness })),
    h("p", { id: "loading" }, stream.isLoading ? "loading" : "idle"),
    h("p", { id: "thread" }, stream.threadId ?? ""),
    h("p", { id: "interrupt" }, stream.interrupt ? JSON.stringify(stream.interrupt.value) : ""),
    h(
      "ul",
      { id: "messages" },
      stream.messages.map((m, i) => h("li", { key: m.id ?? i, "data-type": m.type }, m.text)),
    ),
  );
}

class Harness {
  constructor(transport, extra = {}) {
    this.capture = makeWire();
    this.snapshots = [];
    this.waiters = [];
    this.threadIdCallbacks = [];
    this.createdRunIds = [];
    this.scoped = [];

    this.options = {
      apiUrl: API_URL,
      assistantId: extra.assistantId,
      threadId: extra.threadId ?? null,
      transport,
      onThreadId: (id) => this.threadIdCallbacks.push(id),
      onCreated: ({ runId }) => this.createdRunIds.push(runId),
      ...(transport === "websocket"
        ? { webSocketFactory: this.capture.webSocketFactory }
        : { fetch: this.capture.fetchCapture }),
    };
    this.container = document.createElement("div");
    document.body.appendChild(this.container);
    this.root = createRoot(this.container);
    this.root.render(h(Probe, { options: this.options, harness: this }));
  }

  get last() {
    return this.snapshots.at(-1) ?? null;
  }

  rendered(snapshot) {
    this.snapshots.push(snapshot);
    for (const waiter of [...this.waiters]) waiter.check();
  }

  // Resolves with the first rendered snapshot satisfying `predicate`, checked on every commit
  // and every 20 ms (a predicate may also look at the wire, which does not always re-render).
  // `from`: only snapshots rendered from that index on count.
  until(what, predicate, from = 0) {
    return new Promise((resolve, reject) => {
      const waiter = {
        check: () => {
          const hit = this.snapshots.find((s, i) => i >= from && predicate(s));
          if (!hit) return false;
          clearTimeout(waiter.timer);
          clearInterval(waiter.poll);
          this.waiters = this.waiters.filter((w) => w !== waiter);
          resolve(hit);
          return true;
        },
      };
      waiter.timer = setTimeout(() => {
        clearInterval(waiter.poll);
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new Error(`timed out waiting for ${what}; last render: ${JSON.stringify(this.last)}`));
      }, TIMEOUT_MS);
      if (!waiter.check()) {
        this.waiters.push(waiter);
        waiter.poll = setInterval(waiter.check, 20);
      }
    });
  }

  text(id) {
    return this.container.querySelector(`#${id}`)?.textContent ?? null;
  }

  renderedMessages() {
    return [...this.container.querySelectorAll("#messages li")].map((li) => ({
      type: li.dataset.type,
      text: li.textContent,
    }));
  }

  async unmount() {
    this.root.unmount();
    this.container.remove();
    // let the hook's deferred dispose close its subscriptions / socket
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

// ---------------------------------------------------------------------------------------------
// Scenarios. Each returns plain data; the pytest side asserts it.

function isRootLifecycle(event, name) {
  return event.method === "lifecycle" && (event.params?.namespace ?? []).length === 0 && event.params?.data?.event === name;
}

function caughtUp(wire, streams) {
  const done = new Set(wire.events.filter((e) => isRootLifecycle(e, "interrupted")).map((e) => e.stream));
  return done.size === streams;
}

// The hook opens more than one stream (its content pump and a lifecycle watcher), so the same
// event may arrive twice: the summary is of the distinct events (by event_id, in seq order),
// and the ordering checks are per stream.
function wireSummary(wire) {
  const byStream = new Map();
  for (const e of wire.events) byStream.set(e.stream, [...(byStream.get(e.stream) ?? []), e]);
  const perStream = [...byStream.values()].map((events) => ({
    increasing: events.every((e, i) => i === 0 || e.seq > events[i - 1].seq),
    unique: new Set(events.map((e) => e.event_id)).size === events.length,
  }));
  const distinct = [...new Map(wire.events.map((e) => [e.event_id, e])).values()].sort((a, b) => a.seq - b.seq);
  const sameIdSameEvent = wire.events.every((e) => {
    const { stream: _a, ...one } = e;
    const { stream: _b, ...other } = distinct.find((d) => d.event_id === e.event_id);
    return JSON.stringify(one) === JSON.stringify(other);
  });
  const mine = distinct;
  const deltas = mine
    .filter((e) => e.method === "messages" && e.params?.data?.event === "content-block-delta")
    .map((e) => e.params.data.delta?.text ?? null);
  const rootLifecycle = mine
    .filter((e) => e.method === "lifecycle" && (e.params?.namespace ?? []).length === 0)
    .map((e) => e.params.data.event);
  return {
    methods: [...new Set(mine.map((e) => e.method))].sort(),
    deltas,
    root_lifecycle: rootLifecycle,
    values: mine.filter((e) => e.method === "values" && (e.params?.namespace ?? []).length === 0).map((e) => e.params.data),
    input_requested: mine.filter((e) => e.method === "input.requested").map((e) => e.params.data),
    events: mine.length,
    distinct_seqs: new Set(mine.map((e) => e.seq)).size,
    streams: perStream.length,
    per_stream_in_order: perStream.every((p) => p.increasing && p.unique),
    same_id_same_event: sameIdSameEvent,
    commands: wire.commands,
    sse_streams: wire.streams,
    sse_since: wire.sse_since,
    sockets: wire.sockets,
    cuts: wire.cuts,
  };
}

async function scenarioChat(transport) {
  const probe = new Harness(transport, { assistantId: "chat" });
  try {
    const before = await probe.until("first render", () => true);
    const submitted = probe.stream.submit({ messages: [{ type: "human", content: "hi there" }] });
    const loading = await probe.until("isLoading true", (s) => s.isLoading);
    await submitted;
    const done = await probe.until(
      "chat run to finish",
      // the final text too: the hook's lifecycle watcher (a second stream) may report the end
      // before its content stream has delivered the last tokens
      (s) =>
        !s.isLoading &&
        (s.values?.messages ?? []).length === 2 &&
        s.messages.length === 2 &&
        s.messages[1].text === "echo hi there",
    );
    // every distinct AI text the component rendered while tokens arrived
    const aiTexts = [];
    for (const s of probe.snapshots) {
      const ai = s.messages.filter((m) => m.type === "ai").at(-1);
      if (ai && aiTexts.at(-1) !== ai.text) aiTexts.push(ai.text);
    }
    return {
      initial: { threadId: before.threadId, isLoading: before.isLoading, messages: before.messages.length },
      loading_seen: loading.isLoading,
      thread_id: done.threadId,
      on_thread_id: probe.threadIdCallbacks,
      values: done.values,
      messages: done.messages,
      dom_messages: probe.renderedMessages(),
      dom_loading: probe.text("loading"),
      dom_thread: probe.text("thread"),
      ai_texts_rendered: aiTexts,
      error: done.error,
      wire: wireSummary(probe.capture.wire),
      // The hook stops its content stream once its lifecycle watcher (another stream) reports
      // the end and takes the final values from the thread's state, so on a loaded machine
      // the content stream's last frames may never be read: what the server sent is judged
      // on a replay of the thread's log, the hook's wire only as a prefix of it.
      server: wireSummary({ events: await serverLog(done.threadId) }),
    };
  } finally {
    await probe.unmount();
  }
}

// Every event of the thread's log from the start, read over a plain SSE subscription of our
// own until the root terminal.
async function serverLog(threadId) {
  const response = await fetch(`${API_URL}/threads/${threadId}/stream/events`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ channels: ["lifecycle", "messages", "values"], since: 0 }),
  });
  if (!response.ok) throw new Error(`replay: ${response.status} ${await response.text()}`);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const events = [];
  let buffer = "";
  const deadline = Date.now() + TIMEOUT_MS;
  while (Date.now() < deadline) {
    const chunk = await reader.read();
    if (chunk.done) break;
    buffer += decoder.decode(chunk.value, { stream: true }).replaceAll("\r\n", "\n");
    const taken = takeFrames(buffer);
    buffer = taken.rest;
    for (const { event: parsed } of taken.frames) {
      if (!parsed) continue;
      const event = { ...parsed, stream: "replay" };
      events.push(event);
      if (isRootLifecycle(event, "completed") || isRootLifecycle(event, "failed")) {
        await reader.cancel();
        return events;
      }
    }
  }
  await reader.cancel();
  throw new Error(`no root terminal in the thread's log: ${JSON.stringify(events)}`);
}

async function scenarioInterrupt(transport) {
  const probe = new Harness(transport, { assistantId: "asker" });
  try {
    await probe.until("first render", () => true);
    const submitted = probe.stream.submit({ question: "ship it?" });
    const asked = await probe.until("interrupt", (s) => s.interrupt != null && !s.isLoading);
    await submitted;
    const dom_interrupt = probe.text("interrupt");
    const responded = probe.stream.respond("yes");
    await responded;
    // settled: the answered interrupt gone, whatever order the hook's updates came in
    const done = await probe.until(
      "resumed run to finish, interrupt cleared",
      (s) => !s.isLoading && s.values?.answer === "yes!" && s.interrupt == null,
    );
    return {
      thread_id: asked.threadId,
      on_thread_id: probe.threadIdCallbacks,
      asked: { values: asked.values, interrupt: asked.interrupt, interrupts: asked.interrupts },
      dom_interrupt,
      done: { values: done.values, interrupt: done.interrupt, interrupts: done.interrupts, error: done.error },
      dom_interrupt_after: probe.text("interrupt"),
      wire: wireSummary(probe.capture.wire),
    };
  } finally {
    await probe.unmount();
  }
}

async function scenarioHydrateFinished(transport, threadId) {
  const probe = new Harness(transport, { assistantId: "chat", threadId });
  try {
    const shown = await probe.until(
      "hydrated values",
      (s) => !s.isThreadLoading && (s.values?.messages ?? []).length === 2 && s.messages.length === 2,
    );
    return {
      thread_id: shown.threadId,
      values: shown.values,
      messages: shown.messages,
      dom_messages: probe.renderedMessages(),
      isLoading: shown.isLoading,
      error: shown.error,
    };
  } finally {
    await probe.unmount();
  }
}

// A second component rejoins a thread left waiting at an interrupt, sees the interrupt and the
// values, and answers it from there.
async function scenarioHydrateInterrupted(transport) {
  const first = new Harness(transport, { assistantId: "asker" });
  let threadId;
  try {
    await first.until("first render", () => true);
    await first.stream.submit({ question: "merge it?" });
    const asked = await first.until("interrupt", (s) => s.interrupt != null && !s.isLoading);
    threadId = asked.threadId;
  } finally {
    await first.unmount();
  }
  const probe = new Harness(transport, { assistantId: "asker", threadId });
  try {
    // What a user sees before answering: the thread's values and its interrupt, with every
    // stream the hook opened caught up (each has replayed the first run's root `interrupted`).
    // Answering earlier races the replay, whatever the server: over HTTP a command's
    // `applied_through_seq` is 0 (as on the official server), so an `input.requested` the hook
    // has yet to replay counts as new and brings the answered interrupt back.
    const streams = transport === "sse" ? 2 : 1;
    const shown = await probe.until(
      "hydrated values and interrupt, streams caught up",
      (s) =>
        !s.isThreadLoading &&
        !s.isLoading &&
        s.interrupt != null &&
        s.values?.question === "merge it?" &&
        caughtUp(probe.capture.wire, streams),
    );
    // the tap parses each chunk just before the hook reads it; the hook's parsing is promise
    // jobs, all done before the next task
    await new Promise((resolve) => setTimeout(resolve, 0));
    await probe.stream.respond("no", { interruptId: shown.interrupt.id });
    const done = await probe.until(
      "resumed run to finish, interrupt cleared",
      (s) => !s.isLoading && s.values?.answer === "no!" && s.interrupt == null,
    );
    return {
      thread_id: threadId,
      shown: { values: shown.values, interrupt: shown.interrupt, threadId: shown.threadId, error: shown.error },
      done: { values: done.values, interrupt: done.interrupt, error: done.error },
      wire: wireSummary(probe.capture.wire),
    };
  } finally {
    await probe.unmount();
  }
}

// The connection drops mid-run (every stream the hook has open, cut like a lost network): the
// hook reconnects by itself and the run's remaining values still arrive, each once.
async function scenarioReconnect(transport) {
  const probe = new Harness(transport, { assistantId: "steps" });
  try {
    await probe.until("first render", () => true);
    // submit() settles with the run: not awaited until the end
    const submitted = probe.stream.submit({ tag: `js-${transport}`, sleep: 2 });
    const before = await probe.until("node a's values", (s) => s.isLoading && (s.values?.trail ?? []).join() === "a");
    probe.capture.cut();
    await submitted;
    const done = await probe.until(
      "run to finish after the reconnect",
      (s) => !s.isLoading && (s.values?.trail ?? []).join() === "a,b,c",
    );
    const trails = [];
    for (const s of probe.snapshots) {
      const trail = (s.values?.trail ?? []).join();
      if (trails.at(-1) !== trail) trails.push(trail);
    }
    return {
      thread_id: done.threadId,
      before_cut: { values: before.values, isLoading: before.isLoading },
      done: { values: done.values, isLoading: done.isLoading, error: done.error },
      trails_rendered: trails,
      wire: wireSummary(probe.capture.wire),
    };
  } finally {
    await probe.unmount();
  }
}

// stop() while a run sleeps in node b: the hook cancels it (the classic cancel route) and
// settles; the server keeps what node a wrote.
async function scenarioStop(transport) {
  const probe = new Harness(transport, { assistantId: "steps" });
  try {
    await probe.until("first render", () => true);
    const submitted = probe.stream.submit({ tag: `stop-${transport}`, sleep: 5 });
    await probe.until("node a's values", (s) => s.isLoading && (s.values?.trail ?? []).join() === "a");
    const from = probe.snapshots.length;
    await probe.stream.stop();
    await submitted;
    const stopped = await probe.until("stopped", (s) => !s.isLoading, from);
    return {
      thread_id: stopped.threadId,
      run_ids: probe.createdRunIds,
      stopped: { values: stopped.values, isLoading: stopped.isLoading, error: stopped.error },
      wire: wireSummary(probe.capture.wire),
    };
  } finally {
    await probe.unmount();
  }
}

// A graph that raises: the hook reports the error and settles.
async function scenarioFailure(transport) {
  const probe = new Harness(transport, { assistantId: "failing" });
  try {
    await probe.until("first render", () => true);
    const submitted = probe.stream.submit({ tag: `fail-${transport}` }).catch((error) => `rejected: ${error}`);
    const failed = await probe.until("error shown", (s) => !s.isLoading && s.error != null);
    return {
      thread_id: failed.threadId,
      submit: (await submitted) ?? null,
      failed: { error: failed.error, isLoading: failed.isLoading },
      wire: wireSummary(probe.capture.wire),
    };
  } finally {
    await probe.unmount();
  }
}

// `nested` runs parent_step, then the subgraph node `child`: the hook discovers the subgraph
// and a card mounted for it shows the child's own values.
async function scenarioSubgraph(transport) {
  const probe = new Harness(transport, { assistantId: "nested" });
  try {
    await probe.until("first render", () => true);
    await probe.stream.submit({ items: ["start"] });
    const done = await probe
      .until(
        "nested run and the child's card",
        (s) =>
          !s.isLoading &&
          (s.values?.items ?? []).at(-1) === "child" &&
          // the card's latest render (its own subscription replays the child's values from
          // the start, so an earlier render may show them part-way)
          probe.scoped.at(-1)?.status === "complete" &&
          (probe.scoped.at(-1)?.values?.items ?? []).at(-1) === "child",
      )
      .catch((error) => {
        // what the card last showed and which namespaced lifecycle events came, per stream:
        // tells a card that never re-rendered from an event that never arrived
        const nested = probe.capture.wire.events
          .filter((e) => e.method === "lifecycle" && (e.params?.namespace ?? []).length > 0)
          .map((e) => `${e.stream}:${e.seq}:${e.params.data?.event}`);
        throw new Error(
          `${error.message}; card renders: ${JSON.stringify(probe.scoped.slice(-3))}; ` +
            `nested lifecycle on the wire: ${JSON.stringify(nested)}; ` +
            `wire: ${JSON.stringify(probe.capture.wire.events.map((e) => [e.stream, e.seq, e.method, (e.params?.namespace ?? []).length, e.method === "values" ? e.params.data : e.params?.data?.event]))}; ` +
            `subgraphs now: ${JSON.stringify([...probe.stream.subgraphs.values()].map((g) => g.status))}`,
        );
      });
    const last = probe.scoped.at(-1);
    return {
      values: done.values,
      cards: [...probe.container.querySelectorAll("section.subgraph")].map((el) => el.dataset.node),
      card: last,
      wire: wireSummary(probe.capture.wire),
    };
  } finally {
    await probe.unmount();
  }
}

async function attempt(fn) {
  try {
    return await fn();
  } catch (error) {
    return { failure: String(error?.stack ?? error) };
  }
}

const transports = args.transport === "both" ? ["sse", "websocket"] : [args.transport];
const result = { api_url: API_URL, node: process.version, versions, transports: {} };
for (const transport of transports) {
  const chat = await attempt(() => scenarioChat(transport));
  const out = {
    chat,
    interrupt: await attempt(() => scenarioInterrupt(transport)),
    hydrate_finished: chat.thread_id
      ? await attempt(() => scenarioHydrateFinished(transport, chat.thread_id))
      : { failure: "no chat thread to hydrate" },
    hydrate_interrupted: await attempt(() => scenarioHydrateInterrupted(transport)),
    reconnect: await attempt(() => scenarioReconnect(transport)),
    stop: await attempt(() => scenarioStop(transport)),
    failure: await attempt(() => scenarioFailure(transport)),
    subgraph: await attempt(() => scenarioSubgraph(transport)),
  };
  result.transports[transport] = out;
}
const failed = Object.values(result.transports).some((t) => Object.values(t).some((s) => s.failure));
process.stdout.write(`${JSON.stringify(result)}\n`);
// the hook keeps no timers once unmounted, but do not let a stray socket hold the process
process.exit(failed ? 1 : 0);
