// The chat page: a websocket that survives drops (messages typed meanwhile wait in a queue; a turn
// that was streaming is reloaded from the stored thread), answers rendered by the server
// (content_html: Markdown sanitised there), source cards, stop/regenerate/copy/edit, the
// conversation list (rename, delete, search), the model picker and human error messages.
(() => {
  const {api, apiAll, el, formatDate, plural, icon} = window.achilles;
  window.achilles.pageSocket = true;  // the bell (base.js) takes its frames from this page's socket
  const $ = id => document.getElementById(id);
  const log = $("log"), statusEl = $("status"), banner = $("banner"), input = $("q");
  const errorBox = $("error"), errorText = $("error-text"), retryButton = $("error-retry");
  const LLM_ERRORS = {
    llm_unavailable: gettext("Модель сейчас недоступна. Попробуйте повторить через минуту."),
    llm_timeout: gettext("Модель не ответила вовремя. Попробуйте повторить."),
    llm_bad_response: gettext("Модель ответила некорректно. Попробуйте повторить."),
  };
  const ERRORS = {
    turn_in_progress: gettext("В этой беседе ещё идёт ответ на прошлый вопрос — дождитесь его."),
    conflict: gettext("Дождитесь окончания текущего ответа."),
    not_found: gettext("Беседа не найдена: возможно, её удалили."),
    internal_error: gettext("Внутренняя ошибка сервера; она записана в журнал. Попробуйте повторить."),
  };

  const st = {
    conversationId: new URLSearchParams(location.search).get("c"),
    ws: null, retries: 0, queue: [], busy: false, current: null, lastSent: null, sentAt: 0,
    resume: false, stopping: false, threads: [], found: null, models: [], pendingModel: null, conversation: null,
    editing: null, lastExtra: {},
  };

  // ------------------------------------------------------------------ status, banner, errors
  const setStatus = text => { statusEl.textContent = text; };
  const setBanner = text => { banner.textContent = text || ""; banner.hidden = !text; };
  function showError(text, retry) {
    errorText.textContent = text; errorBox.hidden = false;
    retryButton.hidden = !retry; st.retry = retry || null;
  }
  function hideError() { errorBox.hidden = true; st.retry = null; }
  $("error-dismiss").onclick = hideError;
  retryButton.onclick = () => { const again = st.retry; hideError(); if (again) again(); };
  const describe = f => LLM_ERRORS[f.code] || ERRORS[f.code] ||
      (typeof f.detail === "string" ? f.detail : gettext("Запрос отклонён:") + " " + JSON.stringify(f.detail));

  function setBusy(busy) {
    st.busy = busy; $("stop").hidden = !busy; $("send").hidden = busy;
    if (!busy) setStatus("");
  }

  // ------------------------------------------------------------------ rendering
  const scrollDown = () => { log.scrollTop = log.scrollHeight; };
  function clearEmpty() { const e = $("empty"); if (e) e.hidden = true; }

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    const area = el("textarea"); area.value = text; document.body.append(area); area.select();
    document.execCommand("copy"); area.remove(); return Promise.resolve();
  }
  // An answer as plain text to paste elsewhere: the [N] markers become footnote numbers (¹ ²) and
  // the cited sources follow as footnotes; the withheld hint (a notice of its own) stays out.
  const SUPERSCRIPT = "⁰¹²³⁴⁵⁶⁷⁸⁹";
  const sup = n => String(n).split("").map(d => SUPERSCRIPT[+d]).join("");
  function answerAsText(m) {
    let text = m.content || "";
    const hint = m.withheld_hint && m.withheld_hint.text;
    if (hint && text.endsWith("\n\n" + hint)) text = text.slice(0, -(hint.length + 2));
    const notes = [];
    (m.citations || []).forEach(c => {
      const numbers = (c.markers && c.markers.length) ? c.markers : [c.rank];
      const title = c.available === false ? gettext("источник недоступен") : (c.title || gettext("Без названия"));
      numbers.forEach(n => notes.push([n, title + (c.available !== false && c.url ? " — " + c.url : "")]));
    });
    const known = new Set(notes.map(([n]) => n));
    // outside code spans only a citation's own number is a marker; "[3]" of a list in code stays
    text = text.split(/(```[\s\S]*?```|`[^`\n]*`)/).map((part, i) => i % 2 ? part
        : part.replace(/ ?\[(\d{1,3})\]/g, (whole, n) => known.has(+n) ? sup(n) : whole)).join("");
    if (!notes.length) return text.trim();
    notes.sort((a, b) => a[0] - b[0]);
    return text.trim() + "\n\n" + gettext("Источники:") + "\n" + notes.map(([n, line]) => `${sup(n)} ${line}`).join("\n");
  }
  function iconButton(name, label, onclick) {
    const b = el("button"); b.type = "button"; b.append(icon(name), " " + label); b.setAttribute("aria-label", label);
    b.onclick = onclick; return b;
  }

  function addUser(m, {queued = false} = {}) {
    clearEmpty();
    const box = el("div", "msg user" + (queued ? " queued" : "")); box.append(el("span", "text", m.content));
    if (m.id) box.dataset.id = m.id;
    if (queued) box.append(el("div", "meta", gettext("ждёт соединения…")));
    if (m.id) {  // a stored question: edit it (a new version beside it), flip between its versions
      const meta = el("div", "meta");
      meta.append(iconButton("edit", gettext("изменить"), () => startEdit(m)));
      if (m.sibling_count > 1) meta.append(versions(m));
      box.append(meta);
    }
    log.append(box); scrollDown(); return box;
  }

  // ‹ 2/3 ›: the versions of a message (regenerated answers, edited questions), as LibreChat shows them.
  function versions(m) {
    const nav = el("span", "versions"); nav.setAttribute("role", "group"); nav.setAttribute("aria-label", gettext("Версии"));
    const go = step => async () => {
      const target = m.siblings[m.sibling_index - 1 + step];
      if (!target || st.busy) return;
      const r = await api(`/messages/${target}/choose`, {method: "POST"});
      if (r.ok) open(st.conversationId); else showError(gettext("Не удалось переключить версию."), null);
    };
    const prev = el("button", "version-prev", "‹"); prev.type = "button"; prev.setAttribute("aria-label", gettext("предыдущая версия"));
    const next = el("button", "version-next", "›"); next.type = "button"; next.setAttribute("aria-label", gettext("следующая версия"));
    prev.disabled = m.sibling_index <= 1; next.disabled = m.sibling_index >= m.sibling_count;
    prev.onclick = go(-1); next.onclick = go(1);
    nav.append(prev, el("span", "version-count", `${m.sibling_index}/${m.sibling_count}`), next);
    return nav;
  }
  function startEdit(m) {
    st.editing = m.id; input.value = m.content; input.focus();
    setStatus(gettext("Правка вопроса: новый вариант встанет рядом с прежним. Esc — отменить."));
  }
  function cancelEdit() { if (st.editing !== null) { st.editing = null; input.value = ""; setStatus(""); } }

  function sourceCards(m) {
    return window.achilles.sourceCards(m.citations, {
      prefix: m.id, unavailable: gettext("источник больше недоступен"), openLink: true,
      onOpen: c => { if (c.record_id) api(`/messages/${m.id}/citations/${c.record_id}/click`, {method: "POST"}); },
    });
  }

  // «Запросить доступ»: a request to the named author (a notice in their bell; the server sends only
  // the question and the source's label), answered in place; repeated or too many → the API's text.
  function withheldNotice(hint, messageId) {
    const box = el("div", "withheld"); box.setAttribute("role", "note");
    box.append(el("strong", null, gettext("Доступ ограничен.") + " "), el("span", null, hint.text || ""));
    const state = el("span", "request-state"); state.setAttribute("role", "status");
    (hint.sources || []).forEach(source => {
      const contact = source.contact;
      if (!contact || !contact.user_id || !messageId) return;  // no one to ask: no dead button
      const b = el("button", "link request-access", interpolate(gettext("Запросить доступ (автор: %(x)s)"), {x: contact.name || contact.username}, true));
      b.type = "button";
      b.onclick = async () => {
        b.disabled = true;
        const r = await api(`/messages/${messageId}/access-requests`, {method: "POST",
          body: JSON.stringify({source_system: source.source_system, contact_id: contact.user_id})});
        const body = await r.json().catch(() => ({}));
        state.className = "request-state " + (r.ok ? "muted" : "error");
        state.textContent = typeof body.detail === "string" ? body.detail : interpolate(gettext("Ошибка %(status)s"), {status: r.status}, true);
        if (!r.ok && r.status !== 429) b.disabled = false;
      };
      box.append(" ", b);
    });
    box.append(" ", state);
    return box;
  }

  function renderAssistant(box, m, {last = false} = {}) {
    box.className = `msg assistant ${m.state || ""}`; box.textContent = ""; box.dataset.id = m.id;
    const text = el("div", "text");
    if (m.content_html) text.innerHTML = m.content_html;  // rendered and sanitised by the server
    else text.textContent = m.content || "";
    text.querySelectorAll("pre").forEach(pre => {
      const b = el("button", "copy-code secondary", gettext("копировать")); b.type = "button";
      b.onclick = () => copyText(pre.querySelector("code")?.textContent || pre.textContent).then(() => { b.textContent = gettext("скопировано"); });
      pre.append(b);
    });
    text.querySelectorAll("a.cite").forEach(a => a.addEventListener("click", e => {
      const card = document.getElementById(a.getAttribute("href").slice(1));
      if (card) { e.preventDefault(); card.scrollIntoView({block: "nearest"}); card.classList.add("flash"); setTimeout(() => card.classList.remove("flash"), 1500); }
    }));
    text.querySelectorAll("a:not(.cite)").forEach(a => { a.target = "_blank"; });
    box.append(text);
    if (m.state === "failed") box.append(el("div", "state", gettext("Ответ не получен — ошибка при генерации.")));
    if (m.state === "interrupted") box.append(el("div", "state", gettext("Ответ прерван.")));
    if (m.citations && m.citations.length) box.append(sourceCards(m));
    if (m.withheld_hint) box.append(withheldNotice(m.withheld_hint, m.id));
    const meta = el("div", "meta");
    if (m.state !== "failed") {
      const fb = el("span", "feedback");
      [[1, "up", gettext("полезно")], [-1, "down", gettext("не помогло")]].forEach(([v, name, label]) => {
        const b = iconButton(name, label, async () => {
          const next = m.feedback === v ? null : v;
          const r = await api(`/messages/${m.id}/feedback`, {method: "PUT", body: JSON.stringify({value: next})});
          if (r.ok) { m.feedback = next; fb.querySelectorAll("button").forEach(x => { x.className = ""; x.setAttribute("aria-pressed", "false"); });
                      if (next !== null) { b.className = "on"; b.setAttribute("aria-pressed", "true"); } }
        });
        b.setAttribute("aria-pressed", m.feedback === v ? "true" : "false"); if (m.feedback === v) b.className = "on";
        fb.append(b);
      });
      meta.append(fb);
      const copy = iconButton("copy", gettext("копировать"), () => copyText(answerAsText(m)).then(() => {
        // the event's currentTarget is gone once the promise settles: the button is held here
        copy.lastChild.textContent = " " + gettext("скопировано"); copy.classList.add("done"); setStatus(gettext("Ответ скопирован."));
        setTimeout(() => { copy.lastChild.textContent = " " + gettext("копировать"); copy.classList.remove("done"); }, 2000);
      }, () => showError(gettext("Не удалось скопировать: браузер не дал доступа к буферу обмена."), null)));
      meta.append(copy);
    }
    if (m.sibling_count > 1) meta.append(versions(m));
    if (last) meta.append(iconButton("regen", gettext("повторить ответ"), () => regenerate(m)));
    const info = [m.model, m.state !== "failed" && m.tokens_used ? plural(m.tokens_used, gettext("токен"), gettext("токена"), gettext("токенов")) : null,
                  m.created_at ? formatDate(m.created_at) : null].filter(Boolean).join(" · ");
    if (info) meta.append(el("span", "info", info));
    box.append(meta);
    return box;
  }

  function renderThread(messages) {
    log.querySelectorAll(".msg").forEach(n => n.remove());
    const empty = $("empty"); if (empty) empty.hidden = messages.length > 0;
    const lastAssistant = messages.map(m => m.role).lastIndexOf("assistant");
    messages.forEach((m, i) => {
      if (m.role === "user") addUser(m);
      else { const box = el("div"); log.append(renderAssistant(box, m, {last: i === lastAssistant})); }
    });
    scrollDown();
  }

  // ------------------------------------------------------------------ threads
  async function loadThreads() {
    const r = await api("/conversations?limit=100"); if (!r.ok) return;
    st.threads = (await r.json()).items; drawThreads(); loadShared();
  }
  // Threads colleagues shared with me (read-only, a page of their own).
  async function loadShared() {
    const r = await api("/shared?limit=50"); if (!r.ok) return;
    const items = (await r.json()).items;
    let box = $("shared-threads");
    if (!items.length) { box?.remove(); return; }
    if (!box) {
      box = el("nav", "threads shared-threads"); box.id = "shared-threads"; box.setAttribute("aria-label", gettext("Поделились со мной"));
      $("threads-body").append(box);
    }
    box.textContent = ""; box.append(el("h2", "shared-head", gettext("Поделились со мной")));
    items.forEach(c => {
      const row = el("div", "thread"); const a = el("a"); a.href = `/chat/shared/${c.id}/`;
      a.append(el("span", "title", c.title || gettext("Без названия")), el("span", "date", `${c.owner} · ${formatDate(c.updated_at)}`));
      row.append(a); box.append(row);
    });
  }
  // The search asks the server: titles and what was said in the threads (PostgreSQL full text).
  let searchTimer = null, searchSeq = 0;
  function searchThreads() {
    clearTimeout(searchTimer);
    const q = $("thread-search").value.trim();
    if (!q) { st.found = null; drawThreads(); return; }
    searchTimer = setTimeout(async () => {
      const seq = ++searchSeq;
      const r = await api("/conversations?limit=100&q=" + encodeURIComponent(q));
      if (seq !== searchSeq || !r.ok) return;
      st.found = (await r.json()).items; drawThreads();
    }, 250);
  }
  function drawThreads() {
    const list = $("threads"), q = $("thread-search").value.trim(); list.textContent = "";
    // until the server answers, the titles that match (what the list shows at once)
    const shown = !q ? st.threads : st.found !== null ? st.found
        : st.threads.filter(c => (c.title || "").toLowerCase().includes(q.toLowerCase()));
    if (!shown.length) list.append(el("p", "muted", !q ? gettext("Бесед пока нет.") : st.found === null ? gettext("Ищу…") : gettext("Ничего не найдено.")));
    shown.forEach(c => {
      const row = el("div", "thread" + (c.id === st.conversationId ? " active" : ""));
      const a = el("a"); a.href = "?c=" + c.id; a.append(el("span", "title", c.title || gettext("Без названия")), el("span", "date", formatDate(c.updated_at)));
      if (c.id === st.conversationId) a.setAttribute("aria-current", "page");
      a.onclick = e => { e.preventDefault(); open(c.id); if (matchMedia("(max-width: 720px)").matches) collapseThreads(true); };
      const rename = iconButton("edit", "", () => startRename(row, c)); rename.setAttribute("aria-label", gettext("Переименовать беседу")); rename.title = gettext("Переименовать");
      const del = iconButton("trash", "", () => removeThread(c)); del.setAttribute("aria-label", gettext("Удалить беседу")); del.title = gettext("Удалить");
      row.append(a, rename, del); list.append(row);
    });
  }
  function startRename(row, c) {
    const field = el("input"); field.type = "text"; field.value = c.title || ""; field.maxLength = 200; field.setAttribute("aria-label", gettext("Новое название"));
    row.textContent = ""; row.append(field); field.focus(); field.select();
    let done = false;
    const finish = async save => {
      if (done) return; done = true;
      const title = field.value.trim();
      if (save && title && title !== c.title) {
        const r = await api(`/conversations/${c.id}`, {method: "PATCH", body: JSON.stringify({title})});
        if (r.ok) { c.title = title; if (c.id === st.conversationId) $("thread-title").textContent = title; }
        else showError(gettext("Не удалось переименовать беседу."), null);
      }
      drawThreads();
    };
    field.onkeydown = e => { if (e.key === "Enter") { e.preventDefault(); finish(true); } if (e.key === "Escape") finish(false); };
    field.onblur = () => finish(true);
  }
  async function removeThread(c) {
    if (!confirm(interpolate(gettext("Удалить беседу «%(x)s»? Это нельзя отменить."), {x: c.title || gettext("Без названия")}, true))) return;
    const r = await api(`/conversations/${c.id}`, {method: "DELETE"});
    if (r.ok || r.status === 404) {
      st.threads = st.threads.filter(x => x.id !== c.id);
      if (c.id === st.conversationId) open(null); else drawThreads();
    } else showError(gettext("Не удалось удалить беседу."), null);
  }
  $("thread-search").oninput = () => { st.found = null; drawThreads(); searchThreads(); };
  function collapseThreads(collapsed) {
    $("threads-panel").classList.toggle("collapsed", collapsed);
    $("threads-toggle").setAttribute("aria-expanded", String(!collapsed));
  }
  $("threads-toggle").append(icon("menu"));
  $("threads-toggle").onclick = () => collapseThreads(!$("threads-panel").classList.contains("collapsed"));
  if (matchMedia("(max-width: 720px)").matches) collapseThreads(true);

  async function open(id) {
    st.conversationId = id; st.conversation = null;
    history.replaceState(null, "", id ? "?c=" + id : location.pathname);
    $("thread-title").textContent = gettext("Новый чат"); showThreadActions(id);
    if (!id) { renderThread([]); selectModel(st.pendingModel); loadThreads(); return null; }
    const r = await api(`/conversations/${id}?limit=200`);
    if (r.status === 401) return null;  // on the way to the sign-in form
    if (!r.ok) { renderThread([]); if (r.status === 404) showError(ERRORS.not_found, null); loadThreads(); return null; }
    const thread = await r.json();
    // the first page of messages comes with the thread; a longer thread's next pages follow its cursor
    const messages = (await apiAll(`/conversations/${id}/messages`, thread.messages)) || thread.messages.items;
    if (st.conversationId !== id) return null;  // another thread was opened meanwhile
    const body = {...thread, messages}; st.conversation = body;
    $("thread-title").textContent = body.title || gettext("Без названия");
    renderThread(messages); selectModel(body.selected_model); loadThreads();
    return body;
  }

  // ------------------------------------------------------------------ models
  async function loadModels() {
    const models = await apiAll("/models"); if (!models) return;
    st.models = models; const select = $("model"); select.textContent = "";
    st.models.forEach(m => { const o = el("option", null, m.name + (m.is_default ? " (" + gettext("по умолчанию") + ")" : "")); o.value = m.is_default ? "" : m.name; select.append(o); });
    // always shown (people look for it); with one model there is nothing to choose
    select.disabled = st.models.length < 2;
    select.title = st.models.length < 2 ? gettext("Доступна одна модель") : "";
    selectModel(st.conversation ? st.conversation.selected_model : st.pendingModel);
  }
  function selectModel(name) { $("model").value = name || ""; if ($("model").selectedIndex < 0) $("model").value = ""; }
  $("model").onchange = async () => {
    const name = $("model").value || null;
    if (!st.conversationId) { st.pendingModel = name; return; }  // applied when the thread is created
    const r = await api(`/conversations/${st.conversationId}`, {method: "PATCH", body: JSON.stringify({selected_model: name})});
    if (!r.ok) showError(gettext("Эту модель выбрать нельзя."), null);
  };

  // ------------------------------------------------------------------ connection
  function connect() {
    const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws/chat/");
    st.ws = ws;
    ws.onopen = () => {
      st.retries = 0; st.fallback = false; setBanner(""); document.body.dataset.socket = "open";
      if (window.achilles.bell) { window.achilles.bell.live(true); if (st.reconnected) window.achilles.bell.refresh(); }
      st.reconnected = true;  // a later open is a reconnect: a notice sent while away is counted
      if (st.resume) { st.resume = false; resumeTurn(); }
      flushQueue();
    };
    ws.onclose = ev => {
      if (st.ws !== ws) return;
      st.ws = null; document.body.dataset.socket = "closed";
      window.achilles.bell?.live(false);
      if (ev.code === 4401) { signIn(); return; }  // the session ended: reconnecting cannot help
      if (st.busy && st.transport === "ws") { st.resume = true; setBusy(false); }
      const delay = st.stopping ? 0 : Math.min(10000, 500 * 2 ** st.retries++);
      if (!st.stopping) setBanner(gettext("Соединение потеряно, переподключаюсь… Сообщения не потеряются: они уйдут, как только связь вернётся, или по резервному каналу."));
      st.stopping = false;
      setTimeout(connect, delay);
    };
    ws.onmessage = ev => onFrame(JSON.parse(ev.data));
  }
  function signIn() { st.busy = true; setStatus(gettext("сессия завершена — войдите снова")); window.achilles.signIn(); }

  const socketOpen = () => st.ws && st.ws.readyState === 1;
  // A message waits for the socket this long; then it goes over SSE (POST /api/chat) instead.
  const SSE_FALLBACK_MS = 4000;

  function flushQueue() {
    if (st.busy || !st.queue.length) return;
    if (!socketOpen() && !st.fallback) return;
    const item = st.queue.shift();
    item.box?.classList.remove("queued"); item.box?.querySelector(".meta")?.remove();
    if (socketOpen()) startTurn(item.content, item.extra); else startTurnOverSse(item.content, item.extra);
  }

  function beginAnswer(content, extra = {}) {
    st.current = el("div", "msg assistant"); st.current.append(el("div", "text streaming"));
    // a regenerated answer streams in the old one's place; the old one stays a version to flip back to
    const replaced = extra.regenerate_of && log.querySelector(`.msg.assistant[data-id="${extra.regenerate_of}"]`);
    if (replaced) replaced.replaceWith(st.current); else log.append(st.current);
    scrollDown();
    st.lastSent = content; st.lastExtra = extra; st.sentAt = Date.now(); setBusy(true); setStatus(gettext("отвечаю…"));
  }

  // The same turn over Server-Sent Events, for when the websocket cannot be had.
  async function startTurnOverSse(content, extra = {}) {
    beginAnswer(content, extra); st.transport = "sse"; st.sse = new AbortController();
    const frame = {content, ...extra}; if (st.conversationId) frame.conversation_id = st.conversationId;
    try {
      const r = await api("/chat", {method: "POST", body: JSON.stringify(frame), signal: st.sse.signal});
      if (!r.ok) { const body = await r.json().catch(() => ({detail: r.statusText, code: "internal_error"})); onFrame({event: "error", ...body}); return; }
      const reader = r.body.getReader(), decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const {value, done} = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, {stream: true});
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
          const name = (block.match(/^event: (.*)$/m) || [])[1], data = (block.match(/^data: (.*)$/m) || [])[1];
          if (name && data) onFrame({event: name, ...JSON.parse(data)});
        }
      }
    } catch (exc) {
      if (st.busy) { setBusy(false); st.resume = false; resumeTurn(); }  // stopped or cut off: show what is stored
    } finally { st.transport = null; st.sse = null; }
  }

  function startTurn(content, extra = {}) {
    beginAnswer(content, extra); st.transport = "ws";
    const frame = {content, ...extra}; if (st.conversationId) frame.conversation_id = st.conversationId;
    st.ws.send(JSON.stringify(frame));
  }

  // ``extra``: {regenerate_of: answer id} (no new question) or {edit_of: question id} (the edited
  // question and what followed it leave the page; the new version takes their place).
  function ask(content, extra = {}) {
    hideError(); clearEmpty();
    if (extra.edit_of) {
      const edited = log.querySelector(`.msg.user[data-id="${extra.edit_of}"]`);
      if (edited) { let node = edited; while (node) { const next = node.nextElementSibling; if (node.classList.contains("msg")) node.remove(); node = next; } }
    }
    const show = queued => extra.regenerate_of ? null : addUser({content}, {queued});
    if (socketOpen() && !st.busy) { show(false); startTurn(content, extra); return; }
    if (st.fallback && !st.busy) { show(false); startTurnOverSse(content, extra); return; }
    st.queue.push({content, extra, box: show(true)});
    if (!socketOpen()) setTimeout(() => { if (!socketOpen()) { st.fallback = true; flushQueue(); } }, SSE_FALLBACK_MS);
  }

  // A turn that was streaming when the socket dropped: the server finished it (or marked it
  // interrupted) in the database; show what is stored, waiting while the answer is still being written.
  async function resumeTurn() {
    setStatus(gettext("восстанавливаю ответ…"));
    let id = st.conversationId;
    if (!id) {  // the first question of a new thread: its id never reached us
      const r = await api("/conversations?limit=1"); const items = r.ok ? (await r.json()).items : [];
      if (items.length && new Date(items[0].created_at).getTime() >= st.sentAt - 60000) id = items[0].id;
    }
    if (!id) { setStatus(""); st.current?.remove(); return; }
    for (let attempt = 0; attempt < 120; attempt++) {
      const body = await open(id);
      const last = body && body.messages[body.messages.length - 1];
      if (!body || (last && last.role === "assistant")) break;
      await new Promise(resolve => setTimeout(resolve, 1000));
    }
    setStatus("");
  }

  async function finishTurn(f) {
    const created = !st.conversationId; st.conversationId = f.conversation_id;
    if (created) history.replaceState(null, "", "?c=" + st.conversationId);
    if (created && st.pendingModel) {
      await api(`/conversations/${st.conversationId}`, {method: "PATCH", body: JSON.stringify({selected_model: st.pendingModel})});
    }
    await open(st.conversationId);  // the stored thread, the answer rendered by the server
    setBusy(false); flushQueue();
  }

  function onFrame(f) {
    if (f.event === "notification") {
      window.achilles.bell?.notice(f);
    } else if (f.event === "token") {
      if (!st.current) return;
      st.current.querySelector(".text").textContent += f.text; scrollDown();
    } else if (f.event === "done") {
      finishTurn(f);
    } else if (f.event === "error" && f.code === "not_authenticated") {
      signIn();
    } else if (f.event === "error") {
      const question = st.lastSent, retry = LLM_ERRORS[f.code] || f.code === "internal_error";
      if (f.conversation_id) st.conversationId = f.conversation_id;
      setBusy(false);
      const after = () => {
        const extra = st.lastExtra;
        showError(describe(f), retry ? () => ask(question, extra.regenerate_of ? extra : {}) : null);
        flushQueue();
      };
      if (st.conversationId) open(st.conversationId).then(after);
      else { st.current?.remove(); after(); }
    }
  }

  function stop() {
    if (!st.busy) return;
    if (st.transport === "sse") { setStatus(gettext("останавливаю…")); st.sse.abort(); return; }  // the server sees the client go
    if (!st.ws) return;
    // Closing the socket is the stop: the server ends the turn and stores it as interrupted.
    st.stopping = true; st.resume = true; setStatus(gettext("останавливаю…")); st.ws.close(1000, "stop");
  }
  // The answer again, in its place: the earlier one stays as a version (‹ 1/2 ›).
  function regenerate(m) {
    if (st.busy) return;
    if (m && m.id) { ask("", {regenerate_of: m.id}); return; }
    const users = st.conversation ? st.conversation.messages.filter(x => x.role === "user") : [];
    const question = users.length ? users[users.length - 1].content : st.lastSent;
    if (question) ask(question);
  }

  // ------------------------------------------------------------------ share and export
  function showThreadActions(id) {
    $("thread-actions").hidden = !id;
    if (!id) return;
    $("export-md").href = `/api/conversations/${id}/export?format=markdown`;
    $("export-pdf").href = `/api/conversations/${id}/export?format=pdf`;
    $("export-md").setAttribute("aria-label", gettext("Скачать беседу в Markdown"));
    $("export-pdf").setAttribute("aria-label", gettext("Скачать беседу в PDF"));
  }
  const SHARE_ERRORS = {user_not_found: gettext("Нет активного сотрудника с таким логином."), share_with_owner: gettext("Это ваша беседа.")};
  let readersDrawn = 0;  // the latest draw: an earlier one answering later draws nothing
  async function drawReaders() {
    const turn = ++readersDrawn;
    const readers = await apiAll(`/conversations/${st.conversationId}/shares`) || [];
    if (turn !== readersDrawn) return;
    const list = $("share-readers"); list.textContent = "";
    if (!readers.length) list.append(el("li", "muted", gettext("Пока ни с кем не поделились.")));
    readers.forEach(r => {
      const row = el("li"); row.append(el("span", null, r.name ? `${r.name} (${r.username})` : r.username));
      const revoke = el("button", "secondary", gettext("Отозвать")); revoke.type = "button";
      revoke.setAttribute("aria-label", interpolate(gettext("Отозвать доступ у %(x)s"), {x: r.username}, true));
      revoke.onclick = async () => { const x = await api(`/conversations/${st.conversationId}/shares/${r.reader_id}`, {method: "DELETE"}); if (x.ok || x.status === 404) drawReaders(); };
      row.append(revoke); list.append(row);
    });
  }
  $("share-open").onclick = () => { $("share-error").hidden = true; $("share").showModal(); drawReaders(); $("share-username").focus(); };
  $("share-close").onclick = () => $("share").close();
  $("share-form").onsubmit = async e => {
    e.preventDefault();
    const username = $("share-username").value.trim(); if (!username) return;
    const r = await api(`/conversations/${st.conversationId}/shares`, {method: "POST", body: JSON.stringify({username})});
    if (r.ok) { $("share-username").value = ""; $("share-error").hidden = true; drawReaders(); return; }
    const body = await r.json().catch(() => ({}));
    $("share-error").textContent = SHARE_ERRORS[body.code] || gettext("Не удалось поделиться беседой."); $("share-error").hidden = false;
  };
  document.querySelectorAll("button.example").forEach(b => { b.onclick = () => ask(b.dataset.question); });

  // ------------------------------------------------------------------ input
  $("ask").onsubmit = e => {
    e.preventDefault(); const content = input.value.trim();
    if (!content) return;
    const editing = st.editing; st.editing = null; setStatus("");
    input.value = ""; ask(content, editing ? {edit_of: editing} : {});
  };
  $("stop").onclick = stop;
  input.addEventListener("keydown", e => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); $("ask").requestSubmit(); }
  });
  document.addEventListener("keydown", e => {
    if (e.key === "Escape" && st.busy) { e.preventDefault(); stop(); }
    else if (e.key === "Escape" && st.editing !== null && !$("share").open) { e.preventDefault(); cancelEdit(); }
  });
  $("new").onclick = () => { hideError(); open(null); input.focus(); };

  window.achillesChat = {state: st, answerAsText};  // for the browser tests and debugging
  connect(); open(st.conversationId).then(loadModels);
})();
