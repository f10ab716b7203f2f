// The ledger page: reads GET /v1/swarms/{swarm}/ledger with the signed-in token and renders
// task rows and handoff cards with textContent only (never HTML from data). The token lives in
// this tab's sessionStorage, goes only into the Authorization header and is never logged.
'use strict';

(function () {
  const { $, el, api: call, bind } = window.LedgerSession;
  const body = document.body;
  const swarm = body.dataset.swarm;
  const namespace = body.dataset.namespace || '';
  // Named by namespace and name when the page was opened that way (/ledger/<namespace>/<name>).
  const swarmPath = (namespace ? '/v1/namespaces/' + encodeURIComponent(namespace) : '/v1') +
    '/swarms/' + encodeURIComponent(swarm);
  const pollMs = Math.max(200, Number(body.dataset.pollMs) || 2000);
  let token = window.LedgerSession.stored();
  let caller = null;
  let timer = null;
  let seq = 0;
  let lastCards = [];
  const refusals = new Map(); // execution id -> {reason, message}
  const busy = new Set(); // execution ids with a decision in flight
  const signatures = new Map(); // execution id -> last rendered state

  function show(id, visible) {
    $(id).hidden = !visible;
  }

  function announce(text) {
    $('announce').textContent = text;
  }

  function api(method, path, payload) {
    return call(token, method, path, payload);
  }

  function problemText(r) {
    return r.message === r.error ? r.error : r.message;
  }

  // ---- sign in / out ----------------------------------------------------------------------
  function signedIn(on) {
    show('signin-section', !on);
    show('signout', on);
    for (const id of ['automation', 'tasks', 'handoffs']) show(id, on);
    if (!on) {
      $('whoami').textContent = 'Not signed in';
      show('problem', false);
      $('ledger-rows').replaceChildren();
      $('cards').replaceChildren();
      lastCards = [];
      signatures.clear();
      refusals.clear();
    }
  }

  bind(
    (value) => {
      token = value;
      signedIn(true);
      $('whoami').textContent = 'Signed in; reading the ledger';
      refresh();
    },
    () => {
      token = null;
      caller = null;
      clearTimeout(timer);
      seq += 1;
      signedIn(false);
    },
  );

  // ---- polling ----------------------------------------------------------------------------
  async function refresh() {
    clearTimeout(timer);
    if (!token) return;
    const mine = ++seq;
    const r = await api('GET', swarmPath + '/ledger');
    if (mine !== seq || !token) return;
    if (r.ok) {
      show('problem', false);
      render(r.data);
    } else {
      $('problem').textContent = 'Cannot read this swarm: ' + problemText(r);
      $('problem').dataset.reason = r.error;
      show('problem', true);
      if (r.status === 401 || r.status === 403) {
        $('whoami').textContent = 'Signed in with a token this swarm does not accept';
      }
    }
    timer = setTimeout(refresh, pollMs);
  }

  // ---- rendering --------------------------------------------------------------------------
  function render(data) {
    caller = data.caller;
    $('whoami').textContent =
      caller.kind === 'operator' ? 'Signed in as the operator' : 'Signed in as master ' + caller.agent;
    renderPause(data);
    renderRows(data.rows);
    lastCards = data.cards;
    renderCards(data.cards);
    $('updated').textContent = 'Updated ' + new Date().toLocaleTimeString();
  }

  function renderPause(data) {
    const state = $('pause-state');
    state.textContent = data.paused ? 'paused' : 'not paused';
    state.dataset.paused = String(data.paused);
    const sw = $('pause-switch');
    const operator = caller.kind === 'operator';
    sw.hidden = !operator;
    sw.textContent = data.paused ? 'Unpause recovery' : 'Pause recovery';
    sw.dataset.paused = String(data.paused);
    let note = data.paused
      ? 'Every failure waits for an explicit decision; nothing is replaced on its own.'
      : 'Failures with a usable native checkpoint are resumed without asking.';
    if (!data.automation) note = 'Restore automation is off for this swarm: every failure waits for a decision.';
    if (!operator) note += ' Only the operator can change the switch.';
    $('pause-note').textContent = note;
  }

  $('pause-switch').addEventListener('click', async () => {
    const sw = $('pause-switch');
    const pausing = sw.dataset.paused !== 'true';
    sw.disabled = true;
    const r = await api('POST', swarmPath + (pausing ? '/pause' : '/unpause'));
    sw.disabled = false;
    const problem = $('pause-problem');
    if (r.ok) {
      problem.hidden = true;
      announce(r.data.paused ? 'Recovery paused' : 'Recovery unpaused');
    } else {
      problem.textContent = 'Refused: ' + problemText(r);
      problem.dataset.reason = r.error;
      problem.hidden = false;
    }
    await refresh();
    sw.focus();
  });

  function renderRows(rows) {
    const tbody = $('ledger-rows');
    const out = [];
    for (const row of rows) {
      const tr = el('tr');
      tr.dataset.seat = row.seat;
      tr.dataset.task = row.task_id;
      tr.append(el('td', 'task-text', row.text));
      tr.append(el('td', 'seat', row.seat));
      tr.append(el('td', 'generation', row.generation === null ? '—' : row.generation));
      const awaiting = el('td', 'awaiting');
      if (row.recovery_pending) {
        awaiting.append(el('span', 'badge pending', 'RECOVERY PENDING'));
      } else {
        awaiting.textContent = row.awaiting === null ? '—' : row.awaiting;
      }
      tr.append(awaiting);
      out.push(tr);
    }
    tbody.replaceChildren(...out);
  }

  function stateOf(card) {
    if (card.awaiting_decision) return 'awaiting';
    if (card.held) return 'held'; // a release step waits for the operator's observation
    if (card.recovering) return 'recovering'; // fence steps still running: nothing to choose yet
    if (card.launch_blocked) return 'blocked'; // the launch waits on a credential Secret or on admission
    if (card.restore_refused) return 'refused'; // the replacement refused its restore: fix, then relaunch
    return card.continuity === 'pending' ? 'pending' : 'recovered';
  }

  const STATE_TEXT = {
    awaiting: 'Awaiting decision',
    recovering: 'Recovering',
    held: 'Held: waiting for the operator',
    pending: 'Replacement pending',
    blocked: 'Launch blocked',
    refused: 'Restore refused',
    recovered: 'Recovered',
  };

  function item(dl, term, value, cls) {
    dl.append(el('dt', null, term));
    dl.append(el('dd', cls, value));
  }

  function continuityText(card) {
    const o = card.outcome;
    if (!o) return card.continuity;
    let text = o.recovery;
    if (o.checkpoint_id) text += ' from ' + o.checkpoint_id;
    if (o.watermark !== null && o.watermark !== undefined) text += ' at record ' + o.watermark;
    return text + ' (' + o.status + ')';
  }

  function buildCard(card) {
    const eid = card.execution_id;
    const state = stateOf(card);
    const node = el('article', 'card ' + state);
    node.setAttribute('role', 'listitem');
    node.dataset.execution = eid;
    node.dataset.seat = card.seat;
    node.dataset.state = state;
    const titleId = 'card-' + eid;
    node.setAttribute('aria-labelledby', titleId);
    const title = el('h3', null, 'Seat ' + card.seat);
    title.id = titleId;
    title.tabIndex = -1;
    node.append(title);
    node.append(el('p', 'state-badge ' + state, STATE_TEXT[state]));

    const dl = el('dl');
    if (card.binding === 'launch blocked') {
      // A first launch that cannot be sent yet: no failure and nothing to decide, only why it waits.
      item(dl, 'Attempt', eid, 'execution');
    } else {
      item(dl, 'Failure', card.reason, 'reason');
      item(dl, 'Fenced attempt', eid, 'execution');
      if (state === 'awaiting') {
        item(dl, 'Checkpoint', card.checkpoint || 'none usable', 'checkpoint');
      } else if (state === 'recovering' || state === 'held') {
        item(dl, 'Decision', 'not yet: the failed attempt is still being released', 'decision');
      } else {
        const chosen = card.resume_available ? card.resume_label || 'Resume' : 'Start fresh';
        item(dl, 'Decision', chosen, 'decision');
        item(dl, 'Checkpoint', card.checkpoint || 'none (fresh start)', 'checkpoint');
      }
    }
    if (card.successor) item(dl, 'Replacement', card.successor, 'successor');
    if (card.launch_blocked) item(dl, 'Launch blocked', card.launch_blocked, 'launch-blocked');
    if (card.restore_refused) {
      const rr = card.restore_refused;
      item(dl, 'Restore refused', rr.reason + ' (' + rr.execution_id + ')', 'restore-refused');
      item(dl, 'What to fix', rr.hint, 'fix-hint');
    }
    if (card.relaunches) item(dl, 'Relaunches', card.relaunches, 'relaunches');
    item(dl, 'Continuity', continuityText(card), 'continuity');
    node.append(dl);
    if (card.restore_refused) node.append(relaunchPart(card));

    if (state === 'awaiting') {
      const controls = el('div', 'controls');
      controls.setAttribute('role', 'group');
      controls.setAttribute('aria-label', 'Decision for seat ' + card.seat);
      const inFlight = busy.has(eid);
      if (card.resume_available && card.resume_label) {
        controls.append(control(card, 'resume', card.resume_label, inFlight));
      }
      controls.append(control(card, 'fresh', 'Start fresh', inFlight));
      node.append(controls);
      if (!card.resume_available) {
        node.append(el('p', 'hint', 'No complete compatible checkpoint: only a fresh start is offered.'));
      }
    }
    if (card.held) node.append(heldPart(card));
    const refusal = refusals.get(eid);
    if (refusal) {
      const p = el('p', 'refusal', 'Refused: ' + refusal.message);
      p.setAttribute('role', 'alert');
      p.dataset.reason = refusal.reason;
      node.append(p);
    }
    return node;
  }

  // A replacement that refused its restore: once the cause is fixed, launch the same directive again.
  function relaunchPart(card) {
    const box = el('div', 'relaunch');
    box.append(el('p', 'hint', 'Fix the cause first, then relaunch: the same checkpoint is restored again.'));
    const controls = el('div', 'controls');
    controls.setAttribute('role', 'group');
    controls.setAttribute('aria-label', 'Relaunch for seat ' + card.seat);
    const button = el('button', 'relaunch', 'Relaunch');
    button.type = 'button';
    button.dataset.action = 'relaunch';
    button.setAttribute('aria-label', 'Relaunch the refused replacement of seat ' + card.seat);
    button.disabled = busy.has(card.execution_id);
    button.addEventListener('click', () => relaunch(card));
    controls.append(button);
    box.append(controls);
    return box;
  }

  async function relaunch(card) {
    const eid = card.execution_id;
    const rr = card.restore_refused;
    if (busy.has(eid) || !caller || !rr) return;
    busy.add(eid);
    renderBusy(eid, true);
    const payload = { execution_id: rr.execution_id };
    if (caller.kind === 'master') payload.agent = caller.agent;
    const path =
      swarmPath + '/seats/' + encodeURIComponent(card.seat) + '/relaunch';
    const r = await api('POST', path, payload);
    busy.delete(eid);
    if (r.ok) {
      refusals.delete(eid);
      announce(
        (r.data.replayed ? 'Already relaunched' : 'Relaunched') +
          ' seat ' + card.seat + ' as generation ' + r.data.generation,
      );
    } else {
      refusals.set(eid, { reason: r.error, message: problemText(r) });
      announce('Refused for seat ' + card.seat + ': ' + problemText(r));
    }
    signatures.delete(eid);
    renderCards(lastCards);
    await refresh();
  }

  const ANSWERS = { applied: 'Applied', not_applied: 'Not applied' };

  function heldPart(card) {
    const h = card.held;
    const box = el('div', 'held');
    const since = new Date(h.since_ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
    box.append(el('p', 'held-step', 'Held at ' + h.step + ' since ' + since));
    if (caller.kind !== 'operator') {
      box.append(el('p', 'hint', 'Only the operator can answer a held step (call ' + h.call + ').'));
      return box;
    }
    box.append(
      el('p', 'hint', 'Was ' + h.step + ' applied? Check the account broker for slot ' + h.execution_id + '.'),
    );
    const controls = el('div', 'controls');
    controls.setAttribute('role', 'group');
    controls.setAttribute('aria-label', 'Held step of seat ' + card.seat);
    for (const value of h.accepts || []) {
      if (!ANSWERS[value]) continue;
      const button = el('button', 'observe ' + value, ANSWERS[value]);
      button.type = 'button';
      button.dataset.action = value;
      button.setAttribute('aria-label', ANSWERS[value] + ': ' + h.step + ' for seat ' + card.seat);
      button.disabled = busy.has(card.execution_id);
      button.addEventListener('click', () => answerHeld(card, value));
      controls.append(button);
    }
    box.append(controls);
    return box;
  }

  // A held step's answer: a new resume token first (returned once, kept only in this function), then
  // the resume with the operator's observation. Earlier tokens of the call stop working.
  async function answerHeld(card, value) {
    const eid = card.execution_id;
    const h = card.held;
    if (busy.has(eid) || !caller || caller.kind !== 'operator') return;
    busy.add(eid);
    renderBusy(eid, true);
    const base = '/v1/recoveries/' + encodeURIComponent(h.call);
    let r = await api('POST', base + '/token');
    if (r.ok) {
      const observed = {};
      observed[h.step] = value;
      r = await api('POST', base + '/resume', { resume_token: r.data.resume_token, observed });
    }
    busy.delete(eid);
    if (r.ok) {
      refusals.delete(eid);
      announce('Answered ' + ANSWERS[value] + ' for seat ' + card.seat + ': the recovery carries on');
    } else {
      refusals.set(eid, { reason: r.error, message: problemText(r) });
      announce('Refused for seat ' + card.seat + ': ' + problemText(r));
    }
    signatures.delete(eid);
    renderCards(lastCards);
    await refresh();
  }

  function control(card, choice, label, inFlight) {
    const button = el('button', 'decide ' + choice, label);
    button.type = 'button';
    button.dataset.action = choice;
    button.setAttribute('aria-label', label + ' for seat ' + card.seat);
    button.disabled = inFlight;
    button.addEventListener('click', () => decide(card, choice));
    return button;
  }

  function renderCards(cards) {
    const box = $('cards');
    show('no-handoffs', cards.length === 0);
    const keep = new Set();
    let index = 0;
    for (const card of cards) {
      const eid = card.execution_id;
      keep.add(eid);
      const sig = JSON.stringify([card, refusals.get(eid) || null, busy.has(eid), caller.kind]);
      let node = box.querySelector('article[data-execution="' + CSS.escape(eid) + '"]');
      if (!node || signatures.get(eid) !== sig) {
        const fresh = buildCard(card);
        const focused = node && node.contains(document.activeElement) ? document.activeElement : null;
        if (node) node.replaceWith(fresh);
        else box.insertBefore(fresh, box.children[index] || null);
        if (focused) {
          const again = focused.dataset.action
            ? fresh.querySelector('button[data-action="' + focused.dataset.action + '"]:not([disabled])')
            : null;
          (again || fresh.querySelector('h3')).focus();
        }
        node = fresh;
        signatures.set(eid, sig);
      }
      if (box.children[index] !== node) box.insertBefore(node, box.children[index] || null);
      index += 1;
    }
    for (const node of Array.from(box.children)) {
      if (!keep.has(node.dataset.execution)) {
        signatures.delete(node.dataset.execution);
        node.remove();
      }
    }
  }

  // ---- decisions --------------------------------------------------------------------------
  async function decide(card, choice) {
    const eid = card.execution_id;
    if (busy.has(eid) || !caller) return;
    busy.add(eid);
    const focusedTitle = 'card-' + eid;
    renderBusy(eid, true);
    const agent = caller.kind === 'operator' ? 'operator' : caller.agent;
    const r = await api('POST', '/v1/executions/' + encodeURIComponent(eid) + '/restore-decision', {
      choice,
      agent,
    });
    busy.delete(eid);
    if (r.ok) {
      refusals.delete(eid);
      announce(
        r.data.status === 'recorded'
          ? 'Recorded for seat ' + card.seat + '; the controller applies it on its next pass'
          : 'Decision accepted for seat ' + card.seat + ': ' + r.data.decision,
      );
    } else {
      refusals.set(eid, { reason: r.error, message: problemText(r) });
      announce('Refused for seat ' + card.seat + ': ' + problemText(r));
    }
    signatures.delete(eid);
    renderCards(lastCards); // shows the answer even when the next read is refused
    await refresh();
    if (document.activeElement === document.body || !document.activeElement) {
      const title = document.getElementById(focusedTitle);
      if (title) title.focus();
    }
  }

  function renderBusy(eid, on) {
    const node = $('cards').querySelector('article[data-execution="' + CSS.escape(eid) + '"]');
    if (!node) return;
    node.setAttribute('aria-busy', String(on));
    for (const b of node.querySelectorAll('button.decide, button.observe, button.relaunch')) b.disabled = on;
  }

  // ---- start ------------------------------------------------------------------------------
  if (token) {
    signedIn(true);
    refresh();
  } else {
    signedIn(false);
  }
})();
