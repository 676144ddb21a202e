// The JavaScript handler rows' native server: what js-hello.wasm answers,
// on Node's own `http` (bench/handlers.py starts it: node node-hello.js PORT).
const http = require('node:http');
http
  .createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('hello from javascript\n');
  })
  .listen(Number(process.argv[2]), '127.0.0.1');
