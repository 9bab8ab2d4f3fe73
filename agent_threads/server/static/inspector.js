// agent-threads web inspector: every page reads the service's JSON API (/api), the same
// calls a script makes, with the key kept in this tab's sessionStorage (sent as Bearer).
"use strict";
(function () {
  const KEY = "agent-threads-key";
  const body = document.body;
  const main = document.getElementById("main");
  const page = body.dataset.page;
  const pageId = body.dataset.id;

  class NeedKey extends Error {}

  function headers() {
    const key = sessionStorage.getItem(KEY);
    return key ? { Authorization: "Bearer " + key } : {};
  }

  async function api(path) {
    const answer = await fetch(path, { headers: headers() });
    if (answer.status === 401) throw new NeedKey();
    const data = await answer.json();
    if (!answer.ok) throw new Error((data.error && data.error.message) || answer.statusText);
    return data;
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? "" : value);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
    for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    return node;
  }

  const when = (iso) => (iso ? new Date(iso).toLocaleString() : "");
  const json = (value) => JSON.stringify(value, null, 2);
  const threadLink = (id, text) => el("a", { href: "/ui/threads/" + encodeURIComponent(id) }, text || id);
  const runLink = (id, text) => el("a", { href: "/ui/runs/" + encodeURIComponent(id) }, text || id);

  function usageText(u) {
    if (!u) return "";
    const parts = [`${u.input_tokens} in`, `${u.output_tokens} out`];
    if (u.cost) parts.push("$" + Number(u.cost).toFixed(4));
    return parts.join(" · ");
  }

  function tags(t) {
    return el("span", { class: "tags" }, Object.entries(t || {}).map(([k, v]) => el("span", { class: "tag" }, v ? `${k}:${v}` : k)));
  }

  function show(...nodes) {
    main.replaceChildren(...nodes);
  }

  function failed(error) {
    if (error instanceof NeedKey) {
      const form = document.getElementById("key-form");
      form.hidden = false;
      show(el("p", { class: "error" }, "An API key is needed."), form);
      document.getElementById("key-input").focus();
      return;
    }
    show(el("p", { class: "error" }, String(error.message || error)));
  }

  document.getElementById("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY, document.getElementById("key-input").value.trim());
    location.reload();
  });
  if (sessionStorage.getItem(KEY)) {
    document.getElementById("key-status").append(
      el("button", { class: "link", onclick: () => { sessionStorage.removeItem(KEY); location.reload(); } }, "forget key"));
  }

  // ---- thread list ---------------------------------------------------------------------

  async function threadsPage() {
    const params = new URLSearchParams(location.search);
    const form = el("form", { id: "search", class: "filters" },
      el("input", { name: "title", type: "search", placeholder: "title contains…", value: params.get("title") || "" }),
      el("input", { name: "tag", placeholder: "tags: key:value …", value: params.get("tag") || "" }),
      el("input", { name: "kind", placeholder: "kind", value: params.get("kind") || "" }),
      el("label", {}, el("input", { type: "checkbox", name: "include_sub_threads", value: "true", checked: params.get("include_sub_threads") === "true" }), " sub-threads"),
      el("button", { type: "submit" }, "Search"));
    const query = new URLSearchParams({ limit: "20" });
    for (const name of ["title", "kind", "after", "include_sub_threads", "limit"]) {
      if (params.get(name)) query.set(name, params.get(name));
    }
    // tags: "key:value" pairs separated by spaces, all of them required
    for (const tag of (params.get("tag") || "").split(/\s+/).filter(Boolean)) query.append("tag", tag);
    const list = await api("/api/threads?" + query);
    const rows = list.threads.map((t) => el("tr", { class: "thread-row" },
      el("td", {}, t.kind === "workflow" ? runLink(t.id, t.title || t.id) : threadLink(t.id, t.title || "(untitled)")),
      el("td", { class: "mono" }, t.id),
      el("td", {}, t.kind, t.run_status ? ` (${t.run_status})` : ""),
      el("td", {}, tags(t.tags)),
      el("td", { class: "num" }, t.message_count),
      el("td", { class: "num" }, t.stats.input_tokens + t.stats.output_tokens),
      el("td", {}, t.parent_id ? threadLink(t.parent_id) : ""),
      el("td", {}, when(t.updated_at))));
    const pager = el("p", { class: "pager" });
    if (params.get("after")) pager.append(el("a", { href: "javascript:history.back()" }, "← previous"), " ");
    if (list.next_cursor) {
      const next = new URLSearchParams(params);
      next.set("after", list.next_cursor);
      pager.append(el("a", { id: "next-page", href: "?" + next }, "next →"));
    }
    show(el("h1", {}, "Threads"), form,
      rows.length ? el("table", { id: "threads" },
        el("thead", {}, el("tr", {}, ["Title", "Id", "Kind", "Tags", "Messages", "Tokens", "Fork of", "Updated"].map((h) => el("th", {}, h)))),
        el("tbody", {}, rows)) : el("p", { class: "muted" }, "No threads match."),
      pager);
  }

  // ---- messages ------------------------------------------------------------------------

  function renderMessages(messages, options) {
    const results = new Map();
    for (const m of messages) for (const p of m.contents) if (p.type === "tool_result") results.set(p.call_id, p);
    const paired = new Set();
    const nodes = [];
    messages.forEach((m, index) => {
      const parts = [];
      for (const p of m.contents) {
        if (p.type === "text") parts.push(el("div", { class: "text" }, p.text));
        else if (p.type === "thinking") parts.push(el("details", { class: "thinking" }, el("summary", {}, "thinking"), el("pre", {}, p.text)));
        else if (p.type === "tool_call") {
          const result = results.get(p.call_id);
          if (result) paired.add(p.call_id);
          parts.push(el("details", { class: "tool-call", "data-call-id": p.call_id },
            el("summary", {}, "tool call ", el("b", {}, p.name), result ? (result.is_error ? " → error" : " → result") : " (no result yet)"),
            el("div", { class: "pair" },
              el("div", {}, el("h4", {}, "arguments"), el("pre", {}, json(p.arguments))),
              el("div", { class: result && result.is_error ? "result error" : "result" }, el("h4", {}, "result"),
                el("pre", {}, result ? (typeof result.result === "string" ? result.result : json(result.result)) : "—")))));
        } else if (p.type === "tool_result") {
          if (!paired.has(p.call_id)) parts.push(el("details", { class: "tool-result" }, el("summary", {}, "tool result ", el("span", { class: "mono" }, p.call_id)), el("pre", {}, json(p.result))));
          else parts.push(el("div", { class: "muted small" }, "result of ", el("span", { class: "mono" }, p.call_id), " (shown with its call)"));
        } else if (p.type === "summary") parts.push(el("div", { class: "summary" }, "summary: ", p.text));
        else parts.push(el("pre", { class: "data" }, json(p)));
      }
      const cls = ["message", "role-" + m.role];
      if (options && options.classOf) cls.push(options.classOf(m));
      nodes.push(el("article", { class: cls.join(" "), id: "m-" + m.id, "data-id": m.id },
        el("div", { class: "meta" },
          el("span", { class: "index" }, "#" + (((options && options.first) || 0) + index)),
          el("b", {}, m.role), m.author ? ` (${m.author})` : "",
          el("span", { class: "muted" }, " " + when(m.created_at)),
          m.usage ? el("span", { class: "usage" }, usageText(m.usage)) : ""),
        parts));
    });
    return nodes;
  }

  async function allMessages(threadId) {
    const out = [];
    let after = null;
    for (;;) {
      const q = new URLSearchParams({ limit: "100" });
      if (after) q.set("after", after);
      const pageOf = await api(`/api/threads/${encodeURIComponent(threadId)}/messages?${q}`);
      out.push(...pageOf.messages);
      if (!pageOf.has_more) return out;
      after = pageOf.last_id;
    }
  }

  async function checkpointMessages(threadId, checkpoint) {
    const out = [];
    for (let offset = 0; ; offset += 100) {
      const pageOf = await api(`/api/threads/${encodeURIComponent(threadId)}/checkpoints/${encodeURIComponent(checkpoint)}/messages?offset=${offset}&limit=100`);
      out.push(...pageOf.messages);
      if (!pageOf.has_more) return out;
    }
  }

  // Server-sent events through fetch (EventSource cannot send the Authorization header).
  async function follow(threadId, after, onEvent) {
    const q = after ? "?after=" + encodeURIComponent(after) : "";
    const answer = await fetch(`/api/threads/${encodeURIComponent(threadId)}/events${q}`, { headers: headers() });
    if (!answer.ok || !answer.body) return;
    const reader = answer.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value.replace(/\r\n/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        let event = "message";
        const data = [];
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) event = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        }
        if (data.length) onEvent(event, JSON.parse(data.join("\n")));
      }
    }
  }

  // ---- thread page ---------------------------------------------------------------------

  async function ancestorsAndFamily(summary) {
    let root = summary;
    const seen = new Set([root.id]);
    while (root.parent_id && !seen.has(root.parent_id)) {
      try { root = await api("/api/threads/" + encodeURIComponent(root.parent_id)); } catch (e) { if (e instanceof NeedKey) throw e; break; }
      seen.add(root.id);
    }
    const all = new Map([[root.id, root], [summary.id, summary]]);
    let after = null;
    for (let pages = 0; pages < 50; pages++) {
      const q = new URLSearchParams({ limit: "100", include_sub_threads: "true" });
      if (after) q.set("after", after);
      const list = await api("/api/threads?" + q);
      for (const t of list.threads) all.set(t.id, t);
      if (!list.next_cursor) break;
      after = list.next_cursor;
    }
    const children = new Map();
    for (const t of all.values()) {
      if (t.parent_id && t.id !== root.id) {
        if (!children.has(t.parent_id)) children.set(t.parent_id, []);
        children.get(t.parent_id).push(t);
      }
    }
    return { root, children };
  }

  function forkTree(family, currentId) {
    const { root, children } = family;
    const placed = [];
    let row = 0;
    (function place(node, depth) {
      const at = { node, depth, row: row++ };
      placed.push(at);
      for (const child of (children.get(node.id) || []).sort((a, b) => a.created_at.localeCompare(b.created_at))) {
        const childAt = place(child, depth + 1);
        childAt.parent = at;
      }
      return at;
    })(root, 0);
    const W = 220, H = 44, DX = 250, DY = 60;
    const width = Math.max(...placed.map((p) => p.depth)) * DX + W + 20;
    const height = row * DY + 10;
    const graph = svg("svg", { id: "fork-tree", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "fork tree" });
    for (const p of placed) {
      if (!p.parent) continue;
      const x1 = 10 + p.parent.depth * DX + W / 2, y1 = 10 + p.parent.row * DY + H;
      const x2 = 10 + p.depth * DX, y2 = 10 + p.row * DY + H / 2;
      graph.append(svg("path", { d: `M${x1},${y1} V${y2} H${x2}`, class: "edge" }));
      graph.append(svg("circle", { cx: x1, cy: y2, r: 4, class: "fork-point" },
        svg("title", {}, "fork point: after message " + (p.node.fork_point || "(whole thread)"))));
    }
    for (const p of placed) {
      const x = 10 + p.depth * DX, y = 10 + p.row * DY;
      const link = svg("a", { href: "/ui/threads/" + encodeURIComponent(p.node.id), class: "fork-node" + (p.node.id === currentId ? " current" : ""), "data-id": p.node.id });
      link.append(svg("rect", { x, y, width: W, height: H, rx: 6 }),
        svg("text", { x: x + 8, y: y + 18 }, (p.node.title || "(untitled)").slice(0, 28)),
        svg("text", { x: x + 8, y: y + 34, class: "small" }, `${p.node.id.slice(0, 18)} · ${p.node.message_count} msgs`));
      graph.append(link);
    }
    return graph;
  }

  async function threadPage() {
    const id = pageId;
    const [summary, messages, checkpoints] = await Promise.all([
      api("/api/threads/" + encodeURIComponent(id)),
      allMessages(id),
      api(`/api/threads/${encodeURIComponent(id)}/checkpoints`).then((c) => c.checkpoints),
    ]);
    document.title = "agent-threads: " + (summary.title || id);
    const list = el("section", { id: "messages" });
    const banner = el("div", { id: "checkpoint-banner", hidden: true });
    let current = messages;
    const total = el("span", { id: "total-usage" });
    function renderNow() {
      banner.hidden = true;
      list.replaceChildren(...renderMessages(current));
      total.textContent = `${summary.stats.message_count} messages appended · ${summary.stats.input_tokens} in · ${summary.stats.output_tokens} out` + (summary.stats.cost ? ` · $${Number(summary.stats.cost).toFixed(4)}` : "");
      for (const b of timeline.querySelectorAll("button")) b.classList.remove("chosen");
    }
    async function showCheckpoint(cp, button) {
      const past = await checkpointMessages(id, cp.id);
      const nowIds = new Set(current.map((m) => m.id));
      const pastIds = new Set(past.map((m) => m.id));
      const gone = past.filter((m) => !nowIds.has(m.id)).length;
      const added = current.filter((m) => !pastIds.has(m.id));
      list.replaceChildren(...renderMessages(past, { classOf: (m) => (nowIds.has(m.id) ? "kept" : "gone") }));
      if (added.length) {
        list.append(el("h3", { class: "added-title" }, `added since (${added.length})`),
          ...renderMessages(added, { classOf: () => "added", first: past.length }));
      }
      banner.replaceChildren(
        el("b", {}, `Checkpoint ${cp.label || cp.id}`), ` (${cp.reason}, ${when(cp.created_at)}): `,
        el("span", { id: "checkpoint-count" }, `${past.length} messages then`), `, ${current.length} now; `,
        el("span", { class: "gone-count" }, `${gone} not in the thread now`), ", ",
        el("span", { class: "added-count" }, `${added.length} added since`), " ",
        el("button", { onclick: renderNow, id: "back-to-now" }, "back to now"));
      banner.hidden = false;
      for (const b of timeline.querySelectorAll("button")) b.classList.toggle("chosen", b === button);
    }
    const timeline = el("ol", { id: "timeline" }, checkpoints.map((cp) => {
      const button = el("button", { "data-checkpoint": cp.id, title: `${cp.reason} · ${when(cp.created_at)}` },
        cp.label || cp.reason, el("span", { class: "small" }, ` ${cp.message_count} msgs`));
      button.addEventListener("click", () => showCheckpoint(cp, button).catch(failed));
      return el("li", {}, button);
    }));
    const treeBox = el("section", { id: "fork-tree-box", hidden: true });
    const treeButton = el("button", { id: "show-fork-tree", onclick: async () => {
      treeBox.hidden = !treeBox.hidden;
      if (!treeBox.hidden && !treeBox.firstChild) {
        treeBox.append(el("p", { class: "muted" }, "Loading…"));
        const family = await ancestorsAndFamily(summary);
        treeBox.replaceChildren(el("h2", {}, "Fork tree"), forkTree(family, id));
      }
    } }, "fork tree");
    show(
      el("h1", {}, summary.title || "(untitled)", " ", el("span", { class: "mono small" }, id)),
      el("p", {}, summary.kind, " · ", tags(summary.tags), " · updated ", when(summary.updated_at),
        summary.parent_id ? el("span", {}, " · fork of ", threadLink(summary.parent_id)) : "", " · ", total, " ", treeButton),
      treeBox,
      el("h2", {}, "Checkpoints"), checkpoints.length ? timeline : el("p", { class: "muted" }, "No checkpoints."),
      banner,
      el("h2", {}, "Messages ", el("span", { id: "live", class: "small muted" }, "")),
      list);
    renderNow();
    if (summary.kind !== "workflow") {
      const live = document.getElementById("live");
      live.textContent = "● live";
      follow(id, current.length ? current[current.length - 1].id : null, async (event, data) => {
        if (event === "message") {
          current = current.concat([data]);
          summary.stats.message_count += 1;
          if (data.usage) { summary.stats.input_tokens += data.usage.input_tokens; summary.stats.output_tokens += data.usage.output_tokens; summary.stats.cost += data.usage.cost; }
        } else if (event === "reset") {
          current = await allMessages(id);
        } else if (event === "deleted") {
          live.textContent = "thread deleted";
          return;
        }
        if (banner.hidden) renderNow();
      }).catch(() => { live.textContent = "(live updates stopped)"; });
    }
  }

  // ---- runs ----------------------------------------------------------------------------

  async function runsPage() {
    const list = await api("/api/runs?limit=100");
    show(el("h1", {}, "Workflow runs"),
      list.threads.length ? el("table", { id: "runs" },
        el("thead", {}, el("tr", {}, ["Run", "Workflow", "Status", "Updated"].map((h) => el("th", {}, h)))),
        el("tbody", {}, list.threads.map((r) => el("tr", {},
          el("td", {}, runLink(r.id, r.title || r.id)), el("td", {}, r.workflow || ""),
          el("td", { class: "status-" + r.run_status }, r.run_status), el("td", {}, when(r.updated_at))))))
        : el("p", { class: "muted" }, "No runs."));
  }

  function seconds(step) {
    if (!step.started_at || !step.finished_at) return "";
    return ((new Date(step.finished_at) - new Date(step.started_at)) / 1000).toFixed(3) + " s";
  }

  async function runPage() {
    const id = encodeURIComponent(pageId);
    const [run, subs] = await Promise.all([api("/api/runs/" + id), api(`/api/runs/${id}/sub-threads`)]);
    const columns = await Promise.all(subs.map(async (sub) => el("section", { class: "agent-column", "data-key": sub.key },
      el("h3", {}, sub.key, " ", el("span", { class: "small" }, threadLink(sub.thread.id, "open"))),
      renderMessages(await allMessages(sub.thread.id)))));
    const known = new Set(run.history.map((s) => s.id));
    const steps = run.history.concat(run.current.filter((s) => !known.has(s.id)));
    show(
      el("h1", {}, run.title || run.id, " ", el("span", { class: "mono small" }, run.id)),
      el("p", {}, "workflow ", el("b", {}, run.workflow || "?"), " · status ", el("b", { id: "run-status", class: "status-" + run.status }, run.status),
        ` · superstep ${run.superstep} · updated ${when(run.updated_at)}`),
      run.error ? el("p", { class: "error" }, run.error) : "",
      run.interrupts.length ? el("section", { id: "interrupts" }, el("h2", {}, "Waiting for a reply"),
        run.interrupts.map((s) => el("div", { class: "interrupt" }, el("b", {}, s.step), ` (agent ${s.agent}) asks: `, el("pre", {}, json(s.prompt))))) : "",
      el("h2", {}, "Steps"),
      el("table", { id: "steps" },
        el("thead", {}, el("tr", {}, ["Superstep", "Step", "Agent", "Status", "Attempt", "Started", "Took", "Output / error"].map((h) => el("th", {}, h)))),
        el("tbody", {}, steps.map((s) => el("tr", {},
          el("td", { class: "num" }, s.superstep), el("td", {}, s.step), el("td", {}, s.agent),
          el("td", { class: "status-" + s.status }, s.status), el("td", { class: "num" }, s.attempt),
          el("td", {}, when(s.started_at)), el("td", { class: "num" }, seconds(s)),
          el("td", {}, el("code", {}, s.error || (s.output === null ? "" : JSON.stringify(s.output)))))))),
      run.next.length ? el("p", {}, "next: ", run.next.map((t) => t.step || JSON.stringify(t)).join(", ")) : "",
      el("h2", {}, "Agents"),
      el("div", { class: "columns" }, columns));
    // A run still going is read again every two seconds until it stops or pauses.
    if (run.status === "running") setTimeout(() => runPage().catch(failed), 2000);
  }

  const pages = { threads: threadsPage, thread: threadPage, runs: runsPage, run: runPage };
  (pages[page] || threadsPage)().catch(failed);
})();
