// A real OpenID Connect provider for the login tests: the npm package `oidc-provider` (a certified
// implementation) on plain http over 127.0.0.1, with its own login and consent pages.
//
//   node tests/harness/oidc_provider.mjs <config.json>
//
// config.json: {"port": 0-65535, "issuer": "http://127.0.0.1:<port>", "users_file": "...",
//               "clients": [{client_id, client_secret, redirect_uris}], "cookie_key": "..."}
// users file (reread at every login and userinfo call, so a test changes a user's groups by
// rewriting it): {"<login>": {"password": "...", "claims": {"email": ..., "groups": [...], ...}}}
//
// Guarantees: a login succeeds only with the user's password (the login page says "Invalid
// login or password" otherwise); consent is asked once per grant on a page listing the scopes;
// claims are released per scope (openid: sub; email: email, email_verified, verified_email
// (Google's userinfo v1 name), hd; profile: name, preferred_username; groups: groups); passwords
// and client secrets are never logged. Prints "listening <issuer>" on stdout once it is ready.

import { readFileSync } from 'node:fs';
import http from 'node:http';
import Provider from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));

function users() {
  return JSON.parse(readFileSync(config.users_file, 'utf8'));
}

const provider = new Provider(config.issuer, {
  clients: config.clients.map((c) => ({
    client_id: c.client_id,
    client_secret: c.client_secret,
    redirect_uris: c.redirect_uris,
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_post',
  })),
  async findAccount(ctx, id) {
    const user = users()[id];
    if (!user) return undefined;
    return { accountId: id, async claims() { return { sub: id, ...user.claims }; } };
  },
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified', 'verified_email', 'hd'],
    profile: ['name', 'preferred_username'],
    groups: ['groups'],
  },
  cookies: { keys: [config.cookie_key] },
  features: { devInteractions: { enabled: false } },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  ttl: { AccessToken: 3600, AuthorizationCode: 60, IdToken: 3600, Interaction: 600, Session: 3600, Grant: 3600 },
  // a userinfo answer carries every claim of the granted scopes, not only those of the ID token
  conformIdTokenClaims: false,
});
provider.on('server_error', (ctx, err) => console.error('server_error', err.message));

const escape = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(res, status, title, body) {
  res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
  res.end(`<!doctype html><html><head><title>${escape(title)}</title></head>
<body><h1>${escape(title)}</h1>${body}</body></html>`);
}

function loginForm(uid, message) {
  return `${message ? `<p id="error" role="alert">${escape(message)}</p>` : ''}
<form method="post" action="/interaction/${escape(uid)}/login">
  <label>Login <input id="login" name="login" autocomplete="off" required></label>
  <label>Password <input id="password" name="password" type="password" required></label>
  <button id="sign-in" type="submit">Sign in</button>
</form>`;
}

async function readForm(req) {
  let body = '';
  for await (const chunk of req) {
    body += chunk;
    if (body.length > 2_000_000) throw new Error('form too large');
  }
  return Object.fromEntries(new URLSearchParams(body));
}

async function interaction(req, res, uid, action) {
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) return page(res, 400, 'Bad request', '<p>This sign-in link is stale.</p>');
  const { prompt, params, session } = details;
  if (req.method === 'GET') {
    if (prompt.name === 'login') return page(res, 200, 'Sign in to the test identity provider', loginForm(uid));
    const scopes = String(params.scope || '').split(' ').map((s) => `<li>${escape(s)}</li>`).join('');
    return page(res, 200, 'Authorize', `<p>${escape(params.client_id)} asks for:</p><ul>${scopes}</ul>
<form method="post" action="/interaction/${escape(uid)}/confirm"><button id="allow" type="submit">Allow</button></form>
<form method="post" action="/interaction/${escape(uid)}/abort"><button id="deny" type="submit">Deny</button></form>`);
  }
  if (action === 'login') {
    const form = await readForm(req);
    const user = users()[form.login];
    if (!user || typeof user.password !== 'string' || user.password !== form.password) {
      return page(res, 401, 'Sign in to the test identity provider', loginForm(uid, 'Invalid login or password'));
    }
    return provider.interactionFinished(req, res, { login: { accountId: form.login } },
      { mergeWithLastSubmission: false });
  }
  if (action === 'confirm') {
    const grant = details.grantId ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    const missing = prompt.details;
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    return provider.interactionFinished(req, res, { consent: { grantId: await grant.save() } },
      { mergeWithLastSubmission: true });
  }
  return provider.interactionFinished(req, res,
    { error: 'access_denied', error_description: 'the user denied access' }, { mergeWithLastSubmission: false });
}

const handle = provider.callback();
const server = http.createServer(async (req, res) => {
  const m = /^\/interaction\/([A-Za-z0-9_-]+)(?:\/(login|confirm|abort))?$/.exec(req.url.split('?')[0]);
  if (!m) return handle(req, res);
  try {
    if ((req.method === 'POST') !== Boolean(m[2])) return page(res, 405, 'Method not allowed', '');
    await interaction(req, res, m[1], m[2]);
  } catch (err) {
    console.error('interaction error', err.name);
    if (!res.headersSent) page(res, 400, 'Sign-in failed', `<p>${escape(err.name)}</p>`);
  }
});
server.listen(config.port, '127.0.0.1', () => console.log(`listening ${config.issuer}`));
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => server.close(() => process.exit(0)));
