// The sign-in shared by the ledger's two pages (the swarm list and a swarm's ledger): the bearer
// token lives in this tab's sessionStorage only, is checked against the control API's token syntax
// before it is kept (never echoed back), and goes only into the Authorization header of API calls.
// Nothing here writes HTML: nodes are built with textContent only.
'use strict';

window.LedgerSession = (function () {
  const TOKEN_KEY = 'agentihooks.ledger.token';
  const TOKEN_SHAPE = /^[A-Za-z0-9\-._~+/]{1,4096}=*$/; // the control API's bearer token syntax
  const $ = (id) => document.getElementById(id);

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function stored() {
    try {
      return window.sessionStorage.getItem(TOKEN_KEY);
    } catch (e) {
      return null;
    }
  }

  // One API call with ``token``: {ok, status, data} or {ok: false, status, error, message}.
  async function api(token, method, path, payload) {
    const headers = { Authorization: 'Bearer ' + token, Accept: 'application/json' };
    const init = { method, headers, cache: 'no-store', credentials: 'omit', redirect: 'error' };
    if (payload !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(payload);
    }
    let resp;
    try {
      resp = await fetch(path, init);
    } catch (e) {
      return { ok: false, status: 0, error: 'unreachable', message: 'the control API cannot be reached' };
    }
    let data = null;
    try {
      data = await resp.json();
    } catch (e) {
      data = null;
    }
    if (resp.ok) return { ok: true, status: resp.status, data };
    const error = (data && data.error) || 'http_' + resp.status;
    const message = (data && data.message) || error;
    return { ok: false, status: resp.status, error, message };
  }

  // Wire the sign-in form and the sign-out button: ``onSignIn(token)`` gets a well-formed token
  // (already kept for this tab), ``onSignOut()`` runs once it is forgotten.
  function bind(onSignIn, onSignOut) {
    $('signin').addEventListener('submit', (event) => {
      event.preventDefault();
      const input = $('token');
      const value = input.value.trim();
      input.value = '';
      if (!TOKEN_SHAPE.test(value)) {
        // Never echoed: the message names what is wrong, not the value.
        $('signin-problem').textContent =
          'That is not a bearer token: use letters, digits and - . _ ~ + / only (optionally ending in =).';
        $('signin-problem').hidden = false;
        input.focus();
        return;
      }
      $('signin-problem').hidden = true;
      try {
        window.sessionStorage.setItem(TOKEN_KEY, value);
      } catch (e) {
        // Private modes may refuse storage; the token then lives in memory only.
      }
      onSignIn(value);
    });

    $('signout').addEventListener('click', () => {
      try {
        window.sessionStorage.removeItem(TOKEN_KEY);
      } catch (e) {
        // nothing stored
      }
      onSignOut();
      $('token').focus();
    });
  }

  return { $, el, stored, api, bind };
})();
