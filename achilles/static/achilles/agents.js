// The agents page: create/edit with the schedule form (times like 9:30 accepted, in the owner's
// zone, shown beside it), run now — disabled with the reason when a run cannot start — and history.
document.addEventListener("DOMContentLoaded", () => {
  const {api, apiAll, el, formatDate, plural} = window.achilles;
  const $ = id => document.getElementById(id);
  const labels = JSON.parse($("agent-labels").textContent);
  const overBudget = $("agents-page").dataset.overBudget === "true";
  const FIELDS = {name: gettext("Название"), instructions: gettext("Инструкции"), model: gettext("Модель"), schedule: gettext("Расписание"),
                  every_minutes: gettext("Интервал"), time: gettext("Время"), weekday: gettext("День"), enabled: gettext("Включён")};
  const CODES = {
    unknown_model: gettext("Этой модели нет в списке разрешённых."), wrong_model_kind: gettext("Эта модель не подходит для агентов."),
    no_default_model: gettext("Модель по умолчанию не настроена — выберите модель."), name_empty: gettext("Укажите название."),
    agent_paused: gettext("Агент приостановлен администратором."), agent_disabled: gettext("Агент выключен — включите его, чтобы запустить."),
    model_missing: gettext("Модель агента убрали из списка разрешённых — выберите другую."),
    budget_exceeded: gettext("Недельный бюджет токенов исчерпан — запуск возможен на следующей неделе."),
    already_running: gettext("Запуск уже идёт — дождитесь его окончания."), agent_not_found: gettext("Агент не найден."),
  };
  const TYPES = {missing: gettext("обязательное поле"), string_too_long: gettext("слишком длинно"), string_too_short: gettext("слишком коротко"),
                 greater_than_equal: gettext("слишком маленькое значение"), less_than_equal: gettext("слишком большое значение"),
                 int_parsing: gettext("нужно целое число"), int_type: gettext("нужно целое число")};
  const errorText = body => {
    if (CODES[body.code]) return CODES[body.code];
    if (typeof body.detail === "string") return body.detail;
    return (body.detail || []).map(e => {
      const field = (e.loc || []).filter(x => typeof x === "string" && FIELDS[x]).slice(-1)[0];
      const what = TYPES[e.type] || (field === "time" ? gettext("время в формате ЧЧ:ММ, например 9:30") : gettext("неверное значение"));
      return `${FIELDS[field] || gettext("Поле")}: ${what}`;
    }).join("; ") || gettext("Не удалось сохранить.");
  };
  const zoneDate = (iso, tz) => {
    if (!iso) return "—";
    try { return new Intl.DateTimeFormat(window.achilles.locale, {day: "2-digit", month: "2-digit", year: "numeric", hour: "2-digit", minute: "2-digit", timeZone: tz})
                     .format(new Date(iso)).replace(",", ""); }
    catch { return formatDate(iso); }
  };
  let agents = [], myZone = null;

  $("schedule-type").onchange = () => {
    $("interval-fields").hidden = $("schedule-type").value !== "interval";
    $("calendar-fields").hidden = $("schedule-type").value !== "calendar";
    $("tz-note").textContent = $("schedule-type").value === "calendar" && myZone ? interpolate(gettext("Время по часовому поясу %(my_zone)s."), {my_zone: myZone}, true) : "";
  };

  // "9:30", "9.30", "0930" → "09:30"; anything else is sent as typed and the API says why.
  const normalizeTime = raw => {
    const m = raw.trim().match(/^(\d{1,2})[:.\s]?(\d{2})$/);
    return m ? `${m[1].padStart(2, "0")}:${m[2]}` : raw.trim();
  };
  function schedule() {
    const type = $("schedule-type").value;
    if (type === "interval") return {type, every_minutes: parseInt($("every").value, 10)};
    if (type === "calendar") { $("time").value = normalizeTime($("time").value); return {type, weekday: parseInt($("weekday").value, 10), time: $("time").value}; }
    return null;
  }

  function fill(a) {
    $("form-title").textContent = a ? interpolate(gettext("Агент «%(name)s»"), {name: a.name}, true) : gettext("Новый агент");
    $("agent-id").value = a ? a.id : ""; $("name").value = a ? a.name : ""; $("instructions").value = a ? a.instructions : "";
    $("model").value = a && a.model ? a.model : ""; $("enabled").checked = a ? a.enabled : true;
    const s = a && a.schedule; $("schedule-type").value = s ? s.type : "";
    if (s && s.type === "interval") $("every").value = s.every_minutes;
    if (s && s.type === "calendar") { $("weekday").value = s.weekday; $("time").value = s.time; }
    $("schedule-type").onchange(); $("form-error").textContent = "";
  }

  $("reset").onclick = () => fill(null);
  $("agent-form").onsubmit = async e => {
    e.preventDefault();
    const id = $("agent-id").value;
    const body = {name: $("name").value.trim(), instructions: $("instructions").value, schedule: schedule(), enabled: $("enabled").checked};
    if ($("model").value) body.model = $("model").value;
    const r = await api(id ? `/agents/${id}` : "/agents", {method: id ? "PATCH" : "POST", body: JSON.stringify(body)});
    if (!r.ok) { $("form-error").textContent = errorText(await r.json()); return; }
    fill(null); load();
  };

  const TRIGGERS = {manual: gettext("вручную"), scheduled: gettext("по расписанию"), event: gettext("по событию")};
  const EVENT_KINDS = {created: gettext("создана"), updated: gettext("изменена"), transitioned: gettext("сменила статус")};

  // Hub events that wake the agent: the list with «удалить», and a one-line form to add one.
  async function subscriptions(agent, box) {
    const r = await api(`/agents/${agent.id}/subscriptions`); if (!r.ok) return;
    const subs = await r.json(); box.textContent = "";
    box.append(el("h4", null, gettext("События Jira")));
    subs.forEach(s => {
      const filters = [s.project && gettext("проект") + " " + s.project, s.issue_type && gettext("тип") + " " + s.issue_type,
                       s.status && gettext("статус") + " → " + s.status, s.label && gettext("метка") + " " + s.label].filter(Boolean).join(", ") || gettext("любая задача");
      const line = el("div", "subscription", interpolate(gettext("%(x)s: %(filters)s · пауза %(debounce_seconds)s с"), {x: s.events.map(k => EVENT_KINDS[k] || k).join(" / "), filters: filters, debounce_seconds: s.debounce_seconds}, true));
      const del = el("button", "secondary", gettext("удалить")); del.type = "button";
      del.onclick = async () => { await api(`/agents/${agent.id}/subscriptions/${s.id}`, {method: "DELETE"}); subscriptions(agent, box); };
      line.append(" ", del); box.append(line);
    });
    const form = el("form", "subscribe row");
    const field = (name, placeholder) => { const i = el("input"); i.name = name; i.placeholder = placeholder; i.setAttribute("aria-label", placeholder); return i; };
    const kind = el("select"); kind.name = "events"; kind.setAttribute("aria-label", gettext("событие"));
    Object.entries(EVENT_KINDS).forEach(([k, v]) => { const o = el("option", null, v); o.value = k; kind.append(o); });
    kind.value = "transitioned";
    const add = el("button", "secondary", gettext("Подписать")); add.type = "submit";
    const error = el("span", "error");
    form.append(kind, field("project", gettext("проект")), field("status", gettext("статус")), field("issue_type", gettext("тип")), field("label", gettext("метка")), add, error);
    form.onsubmit = async e => {
      e.preventDefault();
      const body = {events: [kind.value]};
      ["project", "status", "issue_type", "label"].forEach(n => { const v = form.elements[n].value.trim(); if (v) body[n] = v; });
      const resp = await api(`/agents/${agent.id}/subscriptions`, {method: "POST", body: JSON.stringify(body)});
      if (resp.status === 201) subscriptions(agent, box); else error.textContent = errorText(await resp.json());
    };
    box.append(form);
  }

  // A run's output like a chat answer: the server's rendering (Markdown sanitised, [N] linked) and
  // the cited sources as cards; a source closed to you is «источник недоступен», nothing more.
  function runOutput(run) {
    const cell = el("td", "output");
    if (!run.output_html) { cell.textContent = run.output || run.error || ""; return cell; }
    const text = el("div", "text"); text.innerHTML = run.output_html;  // rendered and sanitised by the server
    text.querySelectorAll("a:not(.cite)").forEach(a => { a.target = "_blank"; a.rel = "noopener noreferrer"; });
    text.querySelectorAll("pre").forEach(pre => { pre.tabIndex = 0; });  // scrolls sideways on a phone: keyboard too
    cell.append(text);
    if (!(run.sources || []).length) return cell;
    const wrap = window.achilles.sourceCards(run.sources.map(s => ({...s, markers: [s.marker]})), {prefix: `run${run.id}`});
    cell.append(wrap);
    return cell;
  }

  async function runs(agent, box) {
    const r = await api(`/agents/${agent.id}/runs?limit=10`); if (!r.ok) return;
    const list = (await r.json()).items; box.textContent = "";
    if (!list.length) { box.append(el("div", "muted", gettext("запусков ещё не было"))); return; }
    const table = el("table");
    list.forEach(run => {
      const tr = el("tr", "run");
      const state = (labels.state[run.state] || run.state) + (run.reason ? " · " + (labels.reason[run.reason] || run.reason) : "");
      tr.append(el("td", null, zoneDate(run.finished_at || run.started_at || run.created_at, agent.timezone)),
                el("td", null, TRIGGERS[run.trigger] || run.trigger),
                el("td", "state-" + run.state, state), el("td", null, plural(run.tokens_used || 0, gettext("токен"), gettext("токена"), gettext("токенов"))),
                runOutput(run));
      table.append(tr);
      (run.events || []).forEach(ev => {
        const what = Object.entries(ev.changes || {}).map(([f, [a, b]]) => `${f}: ${a || "—"} → ${b || "—"}`).join("; ");
        const row = el("tr", "run-event"), cell = el("td", "muted",
          `${ev.issue_key} · ${ev.kinds.map(k => EVENT_KINDS[k] || k).join(", ")}${ev.hits > 1 ? " · " + gettext("изменений:") + " " + ev.hits : ""}${what ? " · " + what : ""}`);
        cell.colSpan = 5; row.append(cell); table.append(row);
      });
    });
    box.append(table);
  }

  // Why "run now" cannot start, or null; the server's gates, as the API reports them.
  function runBlocked(a) {
    // The server says whether «run now» would be accepted (can_run / cannot_run_reason).
    if ("can_run" in a) return a.can_run ? null : (CODES[a.cannot_run_reason] || a.cannot_run_reason);
    if (a.admin_paused) return CODES.agent_paused;
    if (!a.enabled) return CODES.agent_disabled;
    if (a.status === "no_model" || !a.model) return CODES.model_missing;
    if (a.status === "running" || a.status === "queued") return CODES.already_running;
    if (overBudget) return CODES.budget_exceeded;
    return null;
  }

  function render() {
    const list = $("list"); list.textContent = ""; list.classList.remove("muted");
    if (!agents.length) { list.append(el("p", "muted", gettext("Агентов пока нет — создайте первого слева."))); return; }
    agents.forEach(a => {
      const box = el("div", "agent"); box.dataset.agentId = a.id;
      const h = el("h3", null, a.name); h.append(el("span", "badge " + a.status, labels.status[a.status] || a.status));
      const when = !a.schedule ? gettext("запуск только вручную")
          : a.next_run_at ? interpolate(gettext("следующий запуск: %(x)s (%(timezone)s)"), {x: zoneDate(a.next_run_at, a.timezone), timezone: a.timezone}, true) : gettext("следующий запуск не запланирован");
      const info = el("div", "muted", `${a.model || gettext("модель не выбрана")} · ${when}`);
      const actions = el("div", "actions");
      const toggle = el("button", "secondary toggle", a.enabled ? gettext("Выключить") : gettext("Включить")); toggle.type = "button";
      toggle.onclick = async () => { await api(`/agents/${a.id}`, {method: "PATCH", body: JSON.stringify({enabled: !a.enabled})}); load(); };
      const run = el("button", "run-now", gettext("Запустить сейчас")); run.type = "button";
      const reason = el("div", "run-reason"); reason.id = `run-reason-${a.id}`; run.setAttribute("aria-describedby", reason.id);
      const blocked = runBlocked(a);
      if (blocked) { run.disabled = true; reason.textContent = blocked; run.title = blocked; }
      const note = el("div", "note muted"); note.setAttribute("aria-live", "polite");
      run.onclick = async () => {
        const r = await api(`/agents/${a.id}/run`, {method: "POST"}); const body = await r.json();
        if (r.status === 202) note.textContent = interpolate(gettext("запуск #%(run_id)s поставлен в очередь"), {run_id: body.run_id}, true);
        else { run.disabled = true; reason.textContent = errorText(body); }
        setTimeout(() => { runs(a, history); load(); }, 1500);
      };
      const edit = el("button", "secondary", gettext("Изменить")); edit.type = "button"; edit.onclick = () => { fill(a); $("name").focus(); };
      const del = el("button", "secondary", gettext("Удалить")); del.type = "button";
      del.onclick = async () => { if (confirm(interpolate(gettext("Удалить агента «%(name)s» и его историю?"), {name: a.name}, true))) { await api(`/agents/${a.id}`, {method: "DELETE"}); load(); } };
      actions.append(run, toggle, edit, del);
      const history = el("div", "runs");
      const subs = el("div", "subscriptions");
      box.append(h, info, actions, reason, note, subs, history); list.append(box); subscriptions(a, subs); runs(a, history);
    });
  }

  async function load() { agents = (await apiAll("/agents")) || []; render(); }

  (async () => {
    const [allModels, me] = await Promise.all([apiAll("/models"), api("/me")]);
    if (me.ok) { myZone = (await me.json()).timezone; $("schedule-type").onchange(); }
    const models = allModels || [];
    const select = $("model"); select.append(el("option", null, gettext("по умолчанию"))); select.lastChild.value = "";
    models.forEach(m => { const o = el("option", null, m.name + (m.is_default ? " (" + gettext("по умолчанию") + ")" : "")); o.value = m.name; select.append(o); });
    load();
  })();
});
