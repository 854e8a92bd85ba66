// The «Знания» page: the sources and how many documents of each the reader may read, search over
// them, and — with the «add document» permission — uploads by drag and drop or the file picker,
// each file with its progress and state, replace and delete. States update by polling the list
// while a document is queued or parsing only, with a growing pause (1 s → 10 s), and not at all
// once everything has settled.
document.addEventListener("DOMContentLoaded", () => {
  const {api, apiAll, el, formatDate, plural, signIn} = window.achilles;
  const $ = id => document.getElementById(id);
  const labels = JSON.parse($("knowledge-labels").textContent);
  const canUpload = $("knowledge-page").dataset.canUpload === "true";
  // a source by its label; a connector's «confluence:3» by its kind's (knowledge/source_labels.py)
  const sourceLabel = name => labels.source[name] || labels.source[String(name).split(":")[0]] || name;
  const csrf = () => document.querySelector('meta[name="csrf-token"]')?.content
      || document.cookie.split("; ").find(c => c.startsWith("csrftoken="))?.split("=")[1] || "";
  const CODES = {
    corrupt: gettext("файл повреждён или это не тот формат, что у расширения"), encrypted: gettext("файл защищён паролем"),
    too_large: gettext("файл больше допустимого размера"), unsupported_format: gettext("этот формат не поддерживается"),
    empty_document: gettext("файл пуст"), needs_ocr: gettext("в файле нет текстового слоя — нужно распознавание (OCR)"),
    ocr_failed: gettext("распознавание текста не удалось"), too_slow: gettext("разбор занял слишком много времени"),
    parse_unfinished: gettext("разбор не завершился за несколько попыток"), invalid_filename: gettext("у файла нет имени"),
    acl_not_allowed: gettext("так открыть доступ нельзя — выберите себя, всех или свою группу"),
    permission_denied: gettext("нет права загружать документы"), document_not_found: gettext("документ не найден"),
  };
  const reason = (code, detail) => CODES[code] ? `${CODES[code]} (${detail || code})` : (detail || gettext("неизвестная ошибка"));
  const errorOf = body => {
    const detail = typeof body.detail === "string" ? body.detail : "";
    if (body.code === "upload_rejected") return gettext("файл не принят:") + " " + (detail.match(/\(.*?: (.*)\)$/)?.[1] || detail);
    return CODES[body.code] ? `${CODES[body.code]}${detail ? ` (${detail})` : ""}` : detail || gettext("не удалось загрузить");
  };
  const IN_FLIGHT = new Set(["queued", "parsing"]);

  // ----------------------------------------------------------------- sources and search
  async function loadSources() {
    const r = await api("/knowledge/sources"); if (!r.ok) return;
    const box = $("sources"); box.textContent = "";
    for (const s of (await r.json()).items) {
      const li = el("li", "source"); li.dataset.source = s.source_system;
      li.append(el("span", "name", sourceLabel(s.source_system)),
                el("span", "count", plural(s.documents, gettext("документ"), gettext("документа"), gettext("документов"))));
      box.append(li);
    }
  }
  $("search-form").onsubmit = async e => {
    e.preventDefault();
    const box = $("search-results"); box.textContent = "…";
    const r = await api("/knowledge/search", {method: "POST", body: JSON.stringify({query: $("search-query").value, k: 8})});
    box.textContent = "";
    if (!r.ok) { box.append(el("p", "error", errorOf(await r.json()))); return; }
    const body = await r.json();
    if (!body.candidates.length) box.append(el("p", "muted", body.withheld.length ? gettext("Ничего доступного вам не нашлось (есть документы, к которым у вас нет доступа).") : gettext("Ничего не нашлось.")));
    for (const c of body.candidates) {
      const item = el("div", "hit");
      const title = c.url ? el("a", "", c.title) : el("strong", "", c.title); if (c.url) title.href = c.url;
      item.append(title, el("span", "badge", sourceLabel(c.source_system)), el("p", "snippet", c.text.slice(0, 300)));
      box.append(item);
    }
  };

  // ----------------------------------------------------------------- documents and their states
  let delay = 1000, timer = null;
  function schedule(inFlight) {
    clearTimeout(timer); timer = null;
    if (!inFlight) { delay = 1000; return; }
    timer = setTimeout(loadDocuments, delay); delay = Math.min(delay * 1.5, 10000);
  }
  const stateBadge = d => {
    const badge = el("span", `badge state-${d.state}`, labels.state[d.state] || d.state);
    badge.dataset.state = d.state; return badge;
  };
  async function loadDocuments() {
    const items = await apiAll("/knowledge/documents");
    const box = $("documents");
    if (items === null) { schedule(true); return; }
    box.textContent = ""; box.className = "";
    if (!items.length) box.append(el("p", "muted", gettext("Документов пока нет.")));
    for (const d of items) {
      const row = el("div", "document"); row.dataset.id = d.id; row.dataset.state = d.state;
      const head = el("div", "doc-head");
      const name = d.state === "indexed" ? el("a", "name", d.filename) : el("span", "name", d.filename);
      if (d.state === "indexed") name.href = d.download_url;
      head.append(name, stateBadge(d));
      row.append(head);
      const meta = [formatDate(d.updated_at), interpolate(gettext("%(size)s КБ"), {size: (d.size / 1024).toFixed(d.size < 10240 ? 1 : 0)}, true)];
      if (d.state === "indexed") meta.push(plural(d.chunks, gettext("фрагмент"), gettext("фрагмента"), gettext("фрагментов")));
      meta.push(d.acl.map(p => p === "everyone" ? gettext("все") : p === `user:${labels.me}` ? gettext("только я") : p.replace(/^group:/, gettext("группа") + " ")).join(", "));
      row.append(el("div", "muted meta", meta.join(" · ")));
      if (d.error) row.append(el("div", "error doc-error", reason(d.error_code, d.error)));
      if (canUpload) {
        const actions = el("div", "actions");
        const replace = el("button", "secondary", gettext("Заменить")); replace.type = "button";
        replace.onclick = () => { replacing = d.id; $("replace-input").value = ""; $("replace-input").click(); };
        const remove = el("button", "danger", gettext("Удалить")); remove.type = "button";
        remove.onclick = async () => {
          if (!confirm(interpolate(gettext("Удалить «%(filename)s»? Документ пропадёт из поиска и ответов."), {filename: d.filename}, true))) return;
          const r = await api(`/knowledge/documents/${d.id}`, {method: "DELETE"});
          if (r.ok || r.status === 404) { loadDocuments(); loadSources(); }
        };
        actions.append(replace, remove); row.append(actions);
      }
      box.append(row);
    }
    const inFlight = items.some(d => IN_FLIGHT.has(d.state));
    if (!inFlight) loadSources();  // the counts move when documents settle
    schedule(inFlight);
  }

  // ----------------------------------------------------------------- uploads
  // One request per file: each file has its own progress bar and its own refusal.
  function send(method, path, form, line) {
    return new Promise(resolve => {
      const xhr = new XMLHttpRequest();
      xhr.open(method, "/api" + path); xhr.setRequestHeader("X-CSRFToken", csrf());
      const bar = line.querySelector("progress");
      xhr.upload.onprogress = e => { if (e.lengthComputable) bar.value = e.loaded / e.total; };
      xhr.onload = () => {
        if (xhr.status === 401) signIn();
        let body = {}; try { body = JSON.parse(xhr.responseText); } catch { /* not JSON */ }
        resolve({ok: xhr.status < 300, status: xhr.status, body});
      };
      xhr.onerror = () => resolve({ok: false, status: 0, body: {detail: gettext("нет связи с сервером")}});
      xhr.send(form);
    });
  }
  function uploadLine(file, verb) {
    const line = el("li", "upload"); line.dataset.filename = file.name;
    const bar = el("progress"); bar.max = 1; bar.value = 0;
    line.append(el("span", "name", file.name), bar, el("span", "status muted", verb));
    $("uploads").prepend(line); return line;
  }
  function finished(line, result) {
    line.querySelector("progress").value = 1;
    const status = line.querySelector(".status");
    if (result.ok) { status.className = "status muted"; status.textContent = gettext("загружен — разбирается"); line.dataset.result = "ok"; }
    else { status.className = "status error"; status.textContent = errorOf(result.body); line.dataset.result = "error"; }
    delay = 1000; loadDocuments();
  }
  async function uploadFiles(files) {
    await Promise.all([...files].map(async file => {
      const line = uploadLine(file, gettext("загружается…"));
      const form = new FormData(); form.append("files", file, file.name); form.append("acl", $("acl").value);
      finished(line, await send("POST", "/knowledge/documents", form, line));
    }));
  }
  let replacing = null;
  if (canUpload) {
    const zone = $("dropzone");
    $("file-input").onchange = () => { uploadFiles($("file-input").files); $("file-input").value = ""; };
    zone.onkeydown = e => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); $("file-input").click(); } };
    zone.ondragover = e => { e.preventDefault(); zone.classList.add("over"); };
    zone.ondragleave = () => zone.classList.remove("over");
    zone.ondrop = e => { e.preventDefault(); zone.classList.remove("over"); if (e.dataTransfer.files.length) uploadFiles(e.dataTransfer.files); };
    $("replace-input").onchange = async () => {
      const file = $("replace-input").files[0]; if (!file || replacing === null) return;
      const line = uploadLine(file, gettext("заменяет документ…"));
      const form = new FormData(); form.append("file", file, file.name);
      finished(line, await send("PUT", `/knowledge/documents/${replacing}`, form, line));
      replacing = null;
    };
  }
  loadSources(); loadDocuments();
});
