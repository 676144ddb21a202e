// js-isolation: a wasi:http 0.2 proxy built with componentize-js
// (StarlingMonkey's fetch event) for the isolation tests. `GET
// /plant/SEED[/PORT]` leaves a secret derived from SEED on globalThis, in
// a module variable, in a closure, in a Map and in 1 MiB of an
// ArrayBuffer; with PORT it then fetches http://127.0.0.1:PORT/ and waits
// for the answer (a test acts on the host while the instance holds the
// secret); it answers `planted`. `GET /both/SEED` plants and probes in
// one request (StarlingMonkey answers one request per instance: a second
// call into the same instance never returns, so this is how a test shows
// the probe sees what a planting left). `GET /probe/SEED` looks in each place and answers `clean`, or `found`
// and the places it was found. The secret is never in a request: both
// sides derive it from the seed.
let planted = null;
const kept = new Map();
let remember = () => null;
let buffer = null;

function secretOf(seed) {
  // FNV-1a over the seed, spread into 32 bytes.
  let h = 0x811c9dc5;
  for (const c of `moat isolation ${seed}`) {
    h = Math.imul(h ^ c.charCodeAt(0), 0x01000193) >>> 0;
  }
  const bytes = [];
  for (let i = 0; i < 32; i++) {
    h = Math.imul(h ^ i, 0x01000193) >>> 0;
    bytes.push((h >>> 8) & 0xff);
  }
  return bytes.map((b) => b.toString(16).padStart(2, '0')).join('');
}

function plant(secret) {
  planted = secret;
  globalThis.moatIsolationSecret = secret;
  kept.set('secret', secret);
  remember = () => secret;
  buffer = new Uint8Array(1 << 20);
  const bytes = new TextEncoder().encode(secret);
  for (let at = 0; at + bytes.length <= buffer.length; at += bytes.length) {
    buffer.set(bytes, at);
  }
  return 'planted\n';
}

function probe(secret) {
  const places = [];
  if (planted === secret) places.push('module');
  if (globalThis.moatIsolationSecret === secret) places.push('global');
  if (kept.get('secret') === secret) places.push('map');
  if (remember() === secret) places.push('closure');
  if (buffer !== null && new TextDecoder().decode(buffer.subarray(0, secret.length)) === secret) {
    places.push('heap');
  }
  return places.length ? `found ${places.join(' ')}\n` : 'clean\n';
}

async function answer(request) {
  const parts = new URL(request.url).pathname.split('/').filter((p) => p);
  let status = 404;
  let text = 'not found\n';
  if ((parts.length === 2 || parts.length === 3) && parts[0] === 'plant') {
    status = 200;
    text = plant(secretOf(parts[1]));
    if (parts.length === 3) {
      await (await fetch(`http://127.0.0.1:${Number(parts[2])}/`)).arrayBuffer();
    }
  } else if (parts.length === 2 && parts[0] === 'both') {
    status = 200;
    plant(secretOf(parts[1]));
    text = probe(secretOf(parts[1]));
  } else if (parts.length === 2 && parts[0] === 'probe') {
    status = 200;
    text = probe(secretOf(parts[1]));
  }
  return new Response(text, { status, headers: { 'content-type': 'text/plain' } });
}

addEventListener('fetch', (event) => event.respondWith(answer(event.request)));
