// baton serve: the little script of the pages. No framework, no build, no inline code (the
// CSP forbids it). Every state-changing request carries the token from
// <meta name="baton-token"> as a bearer header; the HttpOnly cookie alone is refused there.
'use strict';

(function () {
  const tokenMeta = document.querySelector('meta[name="baton-token"]');
  const token = tokenMeta ? tokenMeta.getAttribute('content') : '';

  // POST JSON with the token; resolves to the parsed answer, rejects with a readable message.
  async function post(url, body) {
    const res = await fetch(url, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        'Authorization': 'Bearer ' + token,
      },
      body: JSON.stringify(body),
      credentials: 'same-origin',
    });
    let data = null;
    try { data = await res.json(); } catch (_) { /* not JSON */ }
    if (!res.ok) {
      const e = data && data.error;
      let msg = e ? (e.code + ': ' + e.message) : ('HTTP ' + res.status);
      if (e && e.hint) msg += ' (' + e.hint + ')';
      throw new Error(msg);
    }
    return data || {};
  }

  function setStatus(el, text, isError) {
    if (!el) return;
    el.textContent = text;
    el.classList.toggle('error', !!isError);
  }

  // ---- answering a run's question -----------------------------------------------------

  // The submission of a widget form, from its fields and the button pressed.
  function answerBody(form, submitter) {
    const type = form.dataset.widgetType;
    const widgetId = form.dataset.widgetId || '';
    const widget = (value) => ({ widget: { widgetId: widgetId, type: type, value: value } });
    switch (type) {
      case 'confirmation':
        // As a widget like the others: the model is owed the widgetId it asked with.
        return widget({ confirmed: !!(submitter && submitter.dataset.confirm === 'true') });
      case 'selection': {
        const values = Array.from(form.querySelectorAll('input[name="choice"]:checked')).map((i) => i.value);
        return widget(values);
      }
      case 'form': {
        const value = {};
        form.querySelectorAll('[data-field]').forEach((el) => {
          const name = el.dataset.field;
          if (el.type === 'checkbox') {
            value[name] = el.checked;
          } else if (el.tagName === 'SELECT') {
            try { value[name] = JSON.parse(el.value); } catch (_) { value[name] = el.value; }
          } else if (el.dataset.type === 'number' || el.dataset.type === 'integer') {
            if (el.value !== '') value[name] = Number(el.value);
          } else if (el.value !== '') {
            value[name] = el.value;
          }
        });
        return widget(value);
      }
      case 'feedback': {
        const value = {};
        form.querySelectorAll('[data-field]').forEach((el) => { value[el.dataset.field] = el.value; });
        return widget(value);
      }
      case 'action_selection':
        return widget(submitter ? submitter.dataset.actionId : '');
      case 'plan_review': {
        const decision = submitter ? submitter.dataset.decision : 'approve';
        const value = { decision: decision };
        if (decision === 'request_changes') {
          value.feedback = (form.querySelector('#plan-feedback') || {}).value || '';
        }
        return widget(value);
      }
      default:
        return { text: (form.querySelector('#answer-text') || {}).value || '' };
    }
  }

  async function submitAnswer(form, submitter) {
    const status = form.querySelector('#answer-status');
    const buttons = form.querySelectorAll('button');
    buttons.forEach((b) => { b.disabled = true; });
    setStatus(status, 'Sending…', false);
    try {
      await post(form.dataset.action, answerBody(form, submitter));
      setStatus(status, 'Answered; the run continues.', false);
      form.dataset.answered = 'true';
      scheduleRefresh(0);
    } catch (err) {
      setStatus(status, err.message, true);
      buttons.forEach((b) => { b.disabled = false; });
    }
  }

  // ---- starting a run -------------------------------------------------------------------

  async function submitStart(form) {
    const status = form.querySelector('.status');
    const button = form.querySelector('button[type="submit"]');
    const body = {};
    form.querySelectorAll('[data-field]').forEach((el) => {
      if (el.value !== '') body[el.dataset.field] = el.value;
    });
    button.disabled = true;
    setStatus(status, 'Starting…', false);
    try {
      const answer = await post(form.dataset.action, body);
      const id = answer.runId || (answer.run && answer.run.runId);
      if (!id) throw new Error('the server answered without a run id');
      window.location.assign('/runs/' + encodeURIComponent(id));
    } catch (err) {
      setStatus(status, err.message, true);
      button.disabled = false;
    }
  }

  // ---- answering a question from a page (the epic board, the queue) ---------------------

  // Posts `body` to the form's action; `answered` runs once the server took it.
  async function sendAnswer(form, body, answered) {
    const status = form.querySelector('.status');
    const button = form.querySelector('button');
    button.disabled = true;
    setStatus(status, 'Sending…', false);
    try {
      await post(form.dataset.action, body);
      answered(status);
    } catch (err) {
      setStatus(status, err.message, true);
      button.disabled = false;
    }
  }

  // A story's question on the epic board: the page is reloaded once the autopilot has it.
  function submitEpicAnswer(form) {
    const body = {
      project: form.dataset.project,
      story: form.dataset.story,
      question: form.dataset.question,
      text: form.querySelector('textarea').value,
    };
    sendAnswer(form, body, (status) => {
      setStatus(status, 'Answered; the autopilot continues.', false);
      setTimeout(() => window.location.reload(), 1200);
    });
  }

  // A queued run's question: the form is marked answered and emptied; the unit is queued again.
  function submitQueueAnswer(form) {
    const body = { text: form.querySelector('textarea').value };
    sendAnswer(form, body, (status) => {
      form.dataset.answered = 'true';
      // Cleared, so the next refresh may replace the list (the unit is queued again).
      form.querySelector('textarea').value = '';
      if (document.activeElement) document.activeElement.blur();
      setStatus(status, 'Answered; the next worker goes on with it.', false);
    });
  }

  document.addEventListener('submit', (e) => {
    const form = e.target;
    if (form.id === 'answer-form') {
      e.preventDefault();
      submitAnswer(form, e.submitter);
    } else if (form.classList.contains('start')) {
      e.preventDefault();
      submitStart(form);
    } else if (form.classList.contains('epic-answer')) {
      e.preventDefault();
      submitEpicAnswer(form);
    } else if (form.classList.contains('queue-answer')) {
      e.preventDefault();
      submitQueueAnswer(form);
    }
  });

  // ---- artifacts preview ----------------------------------------------------------------

  document.addEventListener('click', async (e) => {
    const button = e.target.closest('button.artifact');
    if (!button) return;
    const preview = document.getElementById('artifact-preview');
    preview.hidden = false;
    preview.textContent = 'Loading…';
    try {
      const res = await fetch(button.dataset.href, { credentials: 'same-origin' });
      const text = await res.text();
      if (!res.ok) {
        let msg = 'HTTP ' + res.status;
        try { const j = JSON.parse(text); msg = j.error.code + ': ' + j.error.message; } catch (_) { /* keep */ }
        throw new Error(msg);
      }
      // textContent: the file is shown as text, never as markup.
      preview.textContent = text.length > 200000 ? text.slice(0, 200000) + '\n…' : text;
    } catch (err) {
      preview.textContent = 'Cannot show it: ' + err.message;
    }
  });

  // ---- the run page: live sections, timeline and usage ----------------------------------

  const runEl = document.getElementById('run');
  const liveEl = document.querySelector('[data-live]');
  let refreshTimer = null;
  let refreshing = false;
  let refreshAgain = false;

  function scheduleRefresh(delay) {
    if (!liveEl) return;
    if (refreshTimer) return;
    refreshTimer = setTimeout(() => { refreshTimer = null; refresh(); }, delay);
  }

  // Fetches this page again and swaps the live sections; a question being answered stays
  // as it is unless the run now asks something else.
  async function refresh() {
    if (refreshing) { refreshAgain = true; return; }
    refreshing = true;
    try {
      const res = await fetch(window.location.pathname + window.location.search, { credentials: 'same-origin' });
      if (!res.ok) return;
      const doc = new DOMParser().parseFromString(await res.text(), 'text/html');
      document.querySelectorAll('[data-live][id]').forEach((old) => {
        const fresh = doc.getElementById(old.id);
        if (!fresh) return;
        if (old.id === 'question-slot') {
          // The same ask (its key has the time the run began waiting) keeps its form, typed
          // or answered; a new ask or none replaces it.
          const a = old.querySelector('#question');
          const b = fresh.querySelector('#question');
          if (a && b && a.dataset.key === b.dataset.key) return;
        }
        if (old.isEqualNode(fresh)) return;
        // A new question replaces the old form; elsewhere a form in use stays.
        if (old.id !== 'question-slot' && busy(old)) return;
        old.replaceWith(document.importNode(fresh, true));
      });
    } catch (_) {
      // A failed refresh is retried with the next event.
    } finally {
      refreshing = false;
      if (refreshAgain) { refreshAgain = false; scheduleRefresh(150); }
    }
  }

  // Whether a person is using a form inside `el` (focus, or text typed): then it stays.
  function busy(el) {
    if (el.contains(document.activeElement) && document.activeElement !== document.body) return true;
    return Array.from(el.querySelectorAll('textarea, input')).some((f) =>
      (f.type === 'checkbox' || f.type === 'radio') ? f.checked !== f.defaultChecked : f.value !== f.defaultValue);
  }

  // Pages of something that runs without a stream (a live epic, a running session) poll.
  const poll = document.querySelector('[data-poll]');
  if (poll) {
    const every = Math.max(1000, Number(poll.dataset.poll) || 3000);
    setInterval(() => scheduleRefresh(0), every);
  }

  const usage = { turns: 0, tools: 0, prompt: 0, cached: 0, written: 0, completion: 0, total: 0 };
  // The cost is known only while every call was priced (`costUsd` on each usage).
  const cost = { usd: 0, priced: true };
  function showUsage() {
    for (const k of Object.keys(usage)) {
      const el = document.getElementById('usage-' + k);
      if (el) el.textContent = usage[k].toLocaleString();
    }
    // Prompt tokens written to the provider's cache (Anthropic): shown once there are some.
    const w = document.getElementById('usage-written-row');
    if (w) w.hidden = usage.written === 0;
    const c = document.getElementById('usage-cost');
    if (c) c.textContent = cost.priced && usage.turns > 0 ? '$' + cost.usd.toFixed(4) : '—';
  }

  // One audit line as a timeline row, the way `baton runs log` prints it.
  function timelineRow(r) {
    const li = document.createElement('li');
    const t = document.createElement('span');
    t.className = 't';
    t.textContent = typeof r.ts === 'string' ? r.ts.slice(11, 19) : '';
    const k = document.createElement('span');
    k.className = 'k';
    k.textContent = r.kind || '?';
    const d = document.createElement('span');
    d.className = 'd';
    const parts = [];
    if (r.toolName) parts.push(r.toolName);
    if (r.input && typeof r.input.path === 'string') parts.push(r.input.path);
    // A coding-agent CLI's shell command (executor.tool lines), its first line.
    else if (r.input && typeof r.input.command === 'string') {
      parts.push('`' + r.input.command.split('\n')[0].slice(0, 120) + '`');
    }
    if (r.output && r.output.ok === true) parts.push('ok');
    if (r.output && r.output.ok === false) {
      parts.push((r.output.error && r.output.error.code) || 'error');
      li.classList.add('fail');
    }
    if (typeof r.durationMs === 'number') parts.push(r.durationMs + 'ms');
    if (r.nodeId) parts.push('[' + r.nodeId + ']');
    if (r.code) { parts.push(r.code); li.classList.add('fail'); }
    if (r.message) parts.push(String(r.message).slice(0, 300));
    d.textContent = parts.join('  ');
    li.append(t, k, d);
    li.dataset.kind = r.kind || '';
    return li;
  }

  const TIMELINE_ROWS = 1000;

  function onAuditLine(text) {
    let r;
    try { r = JSON.parse(text); } catch (_) { return; }
    if (r.kind === 'engine.turn' || r.kind === 'engine.summary') {
      usage.turns += 1;
      const u = r.usage || {};
      usage.prompt += u.promptTokens || 0;
      usage.cached += u.cachedPromptTokens || 0;
      usage.written += u.cacheWriteTokens || 0;
      usage.completion += u.completionTokens || 0;
      usage.total += u.totalTokens || 0;
      if (typeof u.costUsd === 'number') cost.usd += u.costUsd; else cost.priced = false;
    } else if (r.kind === 'tool.exec' || r.kind === 'executor.tool') {
      usage.tools += 1;
    }
    showUsage();
    const list = document.getElementById('timeline');
    if (list) {
      const atBottom = list.scrollTop + list.clientHeight >= list.scrollHeight - 8;
      list.append(timelineRow(r));
      while (list.children.length > TIMELINE_ROWS) list.firstElementChild.remove();
      if (atBottom) list.scrollTop = list.scrollHeight;
    }
    scheduleRefresh(250);
  }

  if (runEl && window.EventSource) {
    const status = document.getElementById('timeline-status');
    const source = new EventSource(runEl.dataset.events);
    // "Live." only while a process holds the run's driver lock (the page says so first, then
    // each `run` event); an open stream alone only means the log is followed.
    let driven = runEl.dataset.driven === 'true';
    let open = false;
    function showLiveness() {
      if (!open) return;
      if (driven) {
        setStatus(status, 'Live.', false);
      } else {
        setStatus(status, 'No process drives this run; its log is followed.', false);
      }
      status.dataset.driven = driven ? 'true' : 'false';
    }
    // `record`: one audit line (its id is the line number, so a reconnect resumes);
    // `run`: the run's metadata changed; `reset`: the log was replaced, start over.
    source.addEventListener('record', (e) => onAuditLine(e.data));
    source.addEventListener('run', (e) => {
      try {
        const r = JSON.parse(e.data);
        if (typeof r.driven === 'boolean') { driven = r.driven; showLiveness(); }
      } catch (_) { /* keep what is shown */ }
      scheduleRefresh(0);
    });
    source.addEventListener('reset', () => {
      const list = document.getElementById('timeline');
      if (list) list.replaceChildren();
      for (const k of Object.keys(usage)) usage[k] = 0;
      cost.usd = 0;
      cost.priced = true;
      showUsage();
    });
    source.onopen = () => { open = true; showLiveness(); };
    source.onerror = () => { open = false; setStatus(status, 'Reconnecting…', false); };
  }
})();
