// js-hello: the smallest wasi:http 0.2 handler a JavaScript author writes
// with componentize-js (StarlingMonkey's fetch event), for the bench's
// handler rows; bench/node-hello.js answers the same on Node's own `http`.
addEventListener('fetch', (event) => {
  event.respondWith(new Response('hello from javascript\n', {
    headers: { 'content-type': 'text/plain' },
  }));
});
