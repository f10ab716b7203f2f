// The ledger's index: reads GET /v1/swarms with the signed-in token and lists the swarms the caller
// may see, each linking to its ledger page, with textContent only (never HTML from data). The token
// is the ledger page's own (this tab's sessionStorage), sent only in the Authorization header.
'use strict';

(function () {
  const TOKEN_KEY = 'agentihooks.ledger.token';
  const TOKEN_SHAPE = /^[A-Za-z0-9\-._~+/]{1,4096}=*$/; // the control API's bearer token syntax
  const $ = (id) => document.getElementById(id);
  let token = null;
  let seq = 0;

  try {
    token = window.sessionStorage.getItem(TOKEN_KEY);
  } catch (e) {
    token = null;
  }

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

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
    let resp = null;
    let data = null;
    try {
      resp = await fetch('/v1/swarms', {
        headers: { Authorization: 'Bearer ' + token, Accept: 'application/json' },
        cache: 'no-store',
        credentials: 'omit',
        redirect: 'error',
      });
      data = await resp.json();
    } catch (e) {
      data = null;
    }
    if (mine !== seq || !token) return;
    if (resp && resp.ok && data && Array.isArray(data.swarms)) {
      $('problem').hidden = true;
      $('whoami').textContent = 'Signed in';
      render(data.swarms);
      return;
    }
    $('swarm-list').replaceChildren();
    $('no-swarms').hidden = true;
    const error = (data && data.error) || (resp ? 'http_' + resp.status : 'unreachable');
    const problem = $('problem');
    problem.dataset.reason = error;
    problem.dataset.status = resp ? String(resp.status) : '0';
    if (resp && resp.status === 401) {
      problem.textContent = 'The controller did not accept this token.';
      $('whoami').textContent = 'Signed in with a token the controller does not know';
    } else if (resp && resp.status === 403) {
      problem.textContent = 'This token may not list swarms (' + error + ').';
      $('whoami').textContent = 'Signed in with a token that may not list swarms';
    } else {
      problem.textContent = 'Cannot list the swarms: ' + ((data && data.message) || error);
    }
    problem.hidden = false;
  }

  function render(swarms) {
    const items = [];
    for (const s of swarms) {
      const li = el('li', 'swarm');
      li.dataset.swarm = s.swarm;
      const a = el('a', null, s.swarm);
      a.href = '/ledger/' + encodeURIComponent(s.swarm);
      li.append(a);
      const seats = Array.isArray(s.seats) ? s.seats : [];
      li.append(el('span', 'hint seats', ' ' + seats.length + (seats.length === 1 ? ' seat' : ' seats')));
      items.push(li);
    }
    $('swarm-list').replaceChildren(...items);
    $('no-swarms').hidden = swarms.length !== 0;
  }

  $('signin').addEventListener('submit', (event) => {
    event.preventDefault();
    const input = $('token');
    const value = input.value.trim();
    input.value = '';
    if (!TOKEN_SHAPE.test(value)) {
      $('signin-problem').textContent =
        'That is not a bearer token: use letters, digits and - . _ ~ + / only (optionally ending in =).';
      $('signin-problem').hidden = false;
      input.focus();
      return;
    }
    $('signin-problem').hidden = true;
    token = value;
    try {
      window.sessionStorage.setItem(TOKEN_KEY, token);
    } catch (e) {
      // Private modes may refuse storage; the token then lives in memory only.
    }
    signedIn(true);
    $('whoami').textContent = 'Signed in; listing the swarms';
    load();
  });

  $('signout').addEventListener('click', () => {
    token = null;
    seq += 1;
    try {
      window.sessionStorage.removeItem(TOKEN_KEY);
    } catch (e) {
      // nothing stored
    }
    signedIn(false);
    $('token').focus();
  });

  if (token) {
    signedIn(true);
    load();
  } else {
    signedIn(false);
  }
})();
