// The ledger's index: reads GET /v1/swarms with the signed-in token and lists the swarms the caller
// may see, each linking to its ledger page, with textContent only (never HTML from data). The token
// is the ledger page's own (this tab's sessionStorage), sent only in the Authorization header.
'use strict';

(function () {
  const { $, el, api, bind } = window.LedgerSession;
  let token = window.LedgerSession.stored();
  let seq = 0;

  function signedIn(on) {
    $('signin-section').hidden = on;
    $('signout').hidden = !on;
    $('swarms').hidden = !on;
    if (!on) {
      $('whoami').textContent = 'Not signed in';
      $('problem').hidden = true;
      $('swarm-list').replaceChildren();
      $('no-swarms').hidden = true;
    }
  }

  async function load() {
    if (!token) return;
    const mine = ++seq;
    const r = await api(token, 'GET', '/v1/swarms');
    if (mine !== seq || !token) return;
    if (r.ok && r.data && Array.isArray(r.data.swarms)) {
      $('problem').hidden = true;
      $('whoami').textContent = 'Signed in';
      render(r.data.swarms);
      return;
    }
    $('swarm-list').replaceChildren();
    $('no-swarms').hidden = true;
    const problem = $('problem');
    problem.dataset.reason = r.error || 'unexpected_answer';
    problem.dataset.status = String(r.status);
    if (r.status === 401) {
      problem.textContent = 'The controller did not accept this token.';
      $('whoami').textContent = 'Signed in with a token the controller does not know';
    } else if (r.status === 403) {
      problem.textContent = 'This token may not list swarms (' + r.error + ').';
      $('whoami').textContent = 'Signed in with a token that may not list swarms';
    } else {
      problem.textContent = 'Cannot list the swarms: ' + (r.message || r.error || 'unexpected answer');
    }
    problem.hidden = false;
  }

  function render(swarms) {
    const items = [];
    for (const s of swarms) {
      const li = el('li', 'swarm');
      li.dataset.swarm = s.swarm;
      const a = el('a', null, s.swarm);
      a.href = '/ledger/' + (s.namespace ? encodeURIComponent(s.namespace) + '/' : '') + encodeURIComponent(s.swarm);
      li.append(a);
      const seats = Array.isArray(s.seats) ? s.seats : [];
      li.append(el('span', 'hint seats', ' ' + seats.length + (seats.length === 1 ? ' seat' : ' seats')));
      items.push(li);
    }
    $('swarm-list').replaceChildren(...items);
    $('no-swarms').hidden = swarms.length !== 0;
  }

  bind(
    (value) => {
      token = value;
      signedIn(true);
      $('whoami').textContent = 'Signed in; listing the swarms';
      load();
    },
    () => {
      token = null;
      seq += 1;
      signedIn(false);
    },
  );

  if (token) {
    signedIn(true);
    load();
  } else {
    signedIn(false);
  }
})();
