// The hub page: the Jira mirror's issues with the `issues` tool's filters and paging, an issue's card
// (fields, links both ways, comments, the commands that touched it), the batches and a batch's status,
// cancel and retry, and the sync agent's status lines. Everything goes through the hub's REST API
// (/api/hub/…), whose answers and error texts are those of MCP. A batch being worked on is followed
// with the API's wait route (it wakes when the batch finishes — Redis pub/sub — or after 30 s): one
// open request, no polling storm.
document.addEventListener("DOMContentLoaded", () => {
  const {api, el, formatDate} = window.achilles;
  const $ = id => document.getElementById(id);
  const labels = JSON.parse($("hub-labels").textContent);
  const st = {issuesCursor: null, batchesCursor: null, batchId: null, watch: null};
  const detail = async r => {
    const body = await r.json().catch(() => ({}));
    return typeof body.detail === "string" ? body.detail : interpolate(gettext("Ошибка %(status)s"), {status: r.status}, true);
  };
  const link = (text, onclick) => {
    const b = el("button", "link", text); b.type = "button"; b.onclick = onclick; return b;
  };

  // ---------------------------------------------------------------- sync agent
  async function loadAgent() {
    const r = await api("/hub/agent-status"); const box = $("agent-lines"); box.textContent = "";
    if (!r.ok) { box.append(el("li", "error", await detail(r))); return; }
    const status = await r.json();
    (status.lines.length ? status.lines : [gettext("Агент синхронизации ещё не выходил на связь.")]).forEach(line => box.append(el("li", null, line)));
  }

  const RUN_STATUS = {running: gettext("идёт"), ok: gettext("успешно"), failed: gettext("ошибка")};
  async function loadSyncLog() {
    const r = await api("/hub/sync-log?limit=10"); const list = $("sync-log"); list.textContent = "";
    if (!r.ok) { list.append(el("li", "error", await detail(r))); return; }
    const page = await r.json();
    if (!page.items.length) list.append(el("li", "muted", gettext("Синхронизаций ещё не было.")));
    page.items.forEach(run => {
      const li = el("li", "row");
      const counts = Object.entries(run.counts).map(([k, n]) => `${k}: ${n}`).join(", ");
      li.append(el("div", null, `${formatDate(run.started_at)} · ${run.kind} · ${RUN_STATUS[run.status] || run.status}`));
      if (counts) li.append(el("div", "muted meta", counts));
      run.errors.forEach(e => li.append(el("div", "error", e)));
      list.append(li);
    });
  }
  $("sync-log-box").addEventListener("toggle", () => { if ($("sync-log-box").open) loadSyncLog(); });

  // ---------------------------------------------------------------- issues
  function issueQuery() {
    const params = new URLSearchParams({limit: "25"});
    new FormData($("filters")).forEach((value, name) => { if (String(value).trim()) params.set(name, String(value).trim()); });
    return params;
  }
  async function loadIssues(more = false) {
    const params = issueQuery(); if (more && st.issuesCursor) params.set("cursor", st.issuesCursor);
    const r = await api("/hub/issues?" + params); const list = $("issues"), error = $("issues-error");
    error.hidden = r.ok;
    if (!r.ok) { error.textContent = await detail(r); return; }
    const page = await r.json();
    if (!more) list.textContent = "";
    if (!more && !page.items.length) list.append(el("li", "muted", gettext("Ничего не найдено.")));
    page.items.forEach(issue => {
      const row = el("li", "row issue"); row.dataset.key = issue.key;
      const head = el("div", "row-head");
      head.append(link(issue.key, () => openIssue(issue.key)), el("span", "summary", issue.summary), el("span", "badge", issue.status));
      const meta = [issue.assignee || gettext("без исполнителя"), issue.sprint, issue.labels.join(", "), issue.fact_status && gettext("факт:") + " " + issue.fact_status,
                    issue.updated && gettext("обновлена") + " " + formatDate(issue.updated)].filter(Boolean).join(" · ");
      row.append(head, el("div", "muted meta", meta)); list.append(row);
    });
    st.issuesCursor = page.next_cursor; $("issues-more").hidden = !page.next_cursor;
  }
  $("filters").onsubmit = e => { e.preventDefault(); loadIssues(); };
  $("filters").onreset = () => setTimeout(() => loadIssues(), 0);
  $("issues-more").onclick = () => loadIssues(true);

  function dl(pairs) {
    const list = el("dl", "fields");
    pairs.filter(([, v]) => v !== null && v !== undefined && v !== "").forEach(([k, v]) => list.append(el("dt", null, k), el("dd", null, String(v))));
    return list;
  }
  async function openIssue(key) {
    const r = await api(`/hub/issues/${encodeURIComponent(key)}?comments=20`);
    const card = $("card"), body = $("card-body"); card.hidden = false; body.textContent = "";
    if (!r.ok) { $("card-h").textContent = key; body.append(el("p", "error", await detail(r))); return; }
    const c = await r.json(), i = c.issue;
    $("card-h").textContent = `${i.key} — ${i.summary}`;
    body.append(dl([[gettext("Статус"), i.status], [gettext("Тип"), i.issue_type], [gettext("Приоритет"), i.priority], [gettext("Исполнитель"), i.assignee],
                    [gettext("Срок"), i.duedate], [gettext("Спринт"), i.sprint], [gettext("Метки"), i.labels.join(", ")], [gettext("Обновлена"), i.updated && formatDate(i.updated)]]));
    if (c.description) body.append(el("h3", null, gettext("Описание")), el("p", "text", c.description));
    body.append(el("h3", null, gettext("Заметки хаба")), notesForm(i.key, c.notes));
    body.append(el("h3", null, gettext("Связи")));
    const links = el("ul", "plain");
    c.links.forEach(l => {
      const li = el("li"); li.append(el("span", "muted", `${l.direction === "outward" ? "→" : "←"} ${l.link_type} `), link(l.other_key, () => openIssue(l.other_key)));
      if (l.other_summary) li.append(" " + l.other_summary);
      links.append(li);
    });
    if (!c.links.length) links.append(el("li", "muted", gettext("Связей нет.")));
    body.append(links, el("h3", null, interpolate(gettext("Комментарии (%(comments_total)s)"), {comments_total: c.comments_total}, true)));
    const comments = el("ul", "plain comments");
    c.comments.forEach(m => { const li = el("li"); li.append(el("div", "muted", `${m.author} · ${formatDate(m.created)}`), el("div", "text", m.body)); comments.append(li); });
    if (!c.comments.length) comments.append(el("li", "muted", gettext("Комментариев нет.")));
    body.append(comments, commentForm(i.key), el("h3", null, gettext("Команды по задаче")));
    const commands = el("ul", "plain");
    c.recent_commands.forEach(cmd => {
      const li = el("li"); li.append(link(interpolate(gettext("пакет #%(batch_id)s"), {batch_id: cmd.batch_id}, true), () => openBatch(cmd.batch_id)),
                                      ` ${labels.type[cmd.type] || cmd.type}: ${labels.command[cmd.state] || cmd.state}`);
      if (cmd.error) li.append(el("div", "error", cmd.error));
      commands.append(li);
    });
    if (!c.recent_commands.length) commands.append(el("li", "muted", gettext("Команд не было.")));
    body.append(commands);
    card.scrollIntoView({block: "start"});
  }
  // The hub's own notes on an issue (not Jira's fields): PATCH /api/hub/issues/{key}/notes.
  const NOTE_FIELDS = [["fact_status", gettext("Фактический статус")], ["note", gettext("Заметка")], ["next_step", gettext("Следующий шаг")], ["owner", gettext("Ответственный")]];
  function notesForm(key, notes) {
    const form = el("form", "notes"); form.dataset.key = key;
    NOTE_FIELDS.forEach(([name, label]) => {
      const field = el(name === "note" ? "textarea" : "input"); field.name = name; field.value = (notes && notes[name]) || "";
      if (name !== "note") field.type = "text"; else field.rows = 2;
      const wrap = el("label", null, label); wrap.append(field); form.append(wrap);
    });
    const save = el("button", null, gettext("Сохранить заметки")); save.type = "submit";
    const state = el("span", "muted"); state.setAttribute("role", "status");
    const row = el("div", "actions"); row.append(save, state); form.append(row);
    form.onsubmit = async e => {
      e.preventDefault();
      const changes = {};
      NOTE_FIELDS.forEach(([name]) => { const v = form.elements[name].value.trim(); changes[name] = v || null; });
      const r = await api(`/hub/issues/${encodeURIComponent(key)}/notes`, {method: "PATCH", body: JSON.stringify(changes)});
      state.className = r.ok ? "muted" : "error";
      state.textContent = r.ok ? gettext("Сохранено.") : await detail(r);
    };
    return form;
  }
  // A comment to Jira: a batch of one ensure_comment (the hub's batch route, the MCP tool's rules and
  // texts), opened and followed below until the sync agent has done it.
  function commentForm(key) {
    const form = el("form", "jira-comment"); form.dataset.key = key;
    const text = el("textarea"); text.name = "body"; text.rows = 2; text.required = true; text.maxLength = 32000;
    const wrap = el("label", null, gettext("Комментарий в Jira")); wrap.append(text); form.append(wrap);
    const send = el("button", null, gettext("Отправить в Jira")); send.type = "submit";
    const state = el("span", "muted"); state.setAttribute("role", "status");
    const row = el("div", "actions"); row.append(send, state); form.append(row);
    form.onsubmit = async e => {
      e.preventDefault();
      const comment = text.value.trim(); if (!comment) return;
      send.disabled = true;
      const r = await api("/hub/batches", {method: "POST", body: JSON.stringify(
        {title: interpolate(gettext("Комментарий к %(key)s"), {key: key}, true), commands: [{type: "ensure_comment", key, body: comment}]})});
      send.disabled = false;
      if (!r.ok) { state.className = "error"; state.textContent = await detail(r); return; }
      const created = await r.json();
      state.className = "muted"; state.textContent = interpolate(gettext("Создан пакет #%(id)s."), {id: created.id}, true); text.value = "";
      loadBatches(); openBatch(created.id);
    };
    return form;
  }
  $("card-close").onclick = () => { $("card").hidden = true; };

  // ---------------------------------------------------------------- batches
  const counts = b => Object.entries(b.counts).filter(([, n]) => n).map(([s, n]) => `${labels.command[s] || s}: ${n}`).join(", ");
  async function loadBatches(more = false) {
    const params = new URLSearchParams({limit: "20"}); if (more && st.batchesCursor) params.set("cursor", st.batchesCursor);
    const r = await api("/hub/batches?" + params); if (!r.ok) return;
    const page = await r.json(), list = $("batches");
    if (!more) list.textContent = "";
    if (!more && !page.items.length) list.append(el("li", "muted", gettext("Пакетов пока нет.")));
    page.items.forEach(b => {
      const row = el("li", "row batch"); row.dataset.id = b.id;
      const head = el("div", "row-head");
      head.append(link(`#${b.id}`, () => openBatch(b.id)), el("span", "summary", b.title), el("span", `badge state-${b.state}`, labels.batch[b.state] || b.state));
      row.append(head, el("div", "muted meta", [b.author, formatDate(b.created_at), counts(b)].filter(Boolean).join(" · ")));
      list.append(row);
    });
    st.batchesCursor = page.next_cursor; $("batches-more").hidden = !page.next_cursor;
  }
  $("batches-more").onclick = () => loadBatches(true);

  function say(lines, cls) {
    const box = $("batch-lines"); box.textContent = "";
    lines.forEach(line => box.append(el("li", cls || null, line)));
  }
  async function act(path, body, done) {
    const r = await api(path, {method: "POST", body: JSON.stringify(body || {})});
    if (!r.ok) { say([await detail(r)], "error"); return; }
    await done(await r.json());
  }
  function renderBatch(b) {
    $("batch-h").textContent = interpolate(gettext("Пакет #%(id)s — %(title)s"), {id: b.id, title: b.title}, true);
    $("batch").dataset.state = b.state;
    const left = b.finished ? "" : " · " + interpolate(gettext("осталось ≈ %(minutes)s мин"), {minutes: Math.max(1, Math.round(b.estimate_seconds / 60))}, true);
    $("batch-summary").textContent = `${labels.batch[b.state] || b.state} · ${counts(b)} · ${b.author}${left}`;
    const actions = $("batch-actions"); actions.textContent = "";
    if (!b.finished) {
      const cancel = el("button", "secondary", gettext("Отменить пакет")); cancel.type = "button";
      cancel.onclick = () => act(`/hub/batches/${b.id}/cancel`, null, async out => { say(out.lines); renderBatch(out.batch); loadBatches(); });
      actions.append(cancel);
    }
    const list = $("batch-commands"); list.textContent = "";
    b.commands.forEach(cmd => {
      const row = el("li", `row command state-${cmd.state}`); row.dataset.id = cmd.id;
      const head = el("div", "row-head");
      head.append(el("span", null, `${cmd.seq}. ${labels.type[cmd.type] || cmd.type}`), cmd.key ? link(cmd.key, () => openIssue(cmd.key)) : "",
                  el("span", `badge state-${cmd.state}`, labels.command[cmd.state] || cmd.state));
      row.append(head);
      if (cmd.error) row.append(el("div", "error", cmd.error));
      const buttons = el("div", "actions");
      if (cmd.state === "queued" || cmd.state === "claimed") {
        const force = cmd.state === "claimed";
        const b2 = el("button", "secondary", force ? gettext("Отменить у агента") : gettext("Отменить")); b2.type = "button";
        b2.onclick = () => {
          if (force && !confirm(interpolate(gettext("Команда #%(id)s уже у агента. Отменить её принудительно?"), {id: cmd.id}, true))) return;
          act(`/hub/commands/${cmd.id}/cancel`, {force}, () => openBatch(b.id));
        };
        buttons.append(b2);
      }
      if (cmd.state === "failed" || cmd.state === "cancelled") {
        const b3 = el("button", "secondary", gettext("Повторить")); b3.type = "button";
        b3.onclick = () => act(`/hub/commands/${cmd.id}/retry`, {}, async created => {
          say([interpolate(gettext("Создан пакет #%(id)s: команд %(command_count)s."), {id: created.id, command_count: created.command_count}, true)]); loadBatches(); openBatch(created.id, {keepLines: true});
        });
        buttons.append(b3);
      }
      if (buttons.childNodes.length) row.append(buttons);
      list.append(row);
    });
  }
  async function openBatch(id, {keepLines = false} = {}) {
    if (st.watch) { st.watch.abort(); st.watch = null; }
    st.batchId = id; $("batch").hidden = false; if (!keepLines) say([]);
    const r = await api(`/hub/batches/${id}`);
    if (!r.ok) { $("batch-h").textContent = interpolate(gettext("Пакет #%(id)s"), {id: id}, true); $("batch-commands").textContent = ""; say([await detail(r)], "error"); return; }
    const b = await r.json(); renderBatch(b);
    if (!b.finished) follow(id);
  }
  // One long request at a time: the wait route answers when the batch finishes or after 30 s.
  async function follow(id) {
    const watch = new AbortController(); st.watch = watch;
    while (st.batchId === id && !watch.signal.aborted) {
      let r;
      try { r = await api(`/hub/batches/${id}/wait?timeout_minutes=0.5`, {signal: watch.signal}); } catch (e) { return; }
      if (!r.ok || st.batchId !== id || watch.signal.aborted) return;
      const b = await r.json(); renderBatch(b);
      if (b.finished) { loadBatches(); loadAgent(); return; }
    }
  }
  $("batch-close").onclick = () => { $("batch").hidden = true; st.batchId = null; if (st.watch) st.watch.abort(); };

  window.achillesHub = {state: st, openBatch, openIssue};  // for the browser tests and debugging
  loadAgent(); loadIssues(); loadBatches();
  const wanted = new URLSearchParams(location.search);
  if (wanted.get("batch")) openBatch(Number(wanted.get("batch")));
  if (wanted.get("issue")) openIssue(wanted.get("issue"));
});
