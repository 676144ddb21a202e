// js-net: a command built with jco's QuickJS backend (componentize-qjs),
// using node:net, which jco's bundler maps onto wasi:sockets 0.2.
// `js-net HOST PORT MESSAGE` connects, sends MESSAGE, half-closes and
// prints what came back as `got: ...`; a failure prints
// `error: CODE MESSAGE` (a denied connect is EACCES) and exits 1.
//
// It exports wasi:cli/run 0.3, not 0.2: componentize-qjs lifts a 0.2 run
// synchronously and never runs the promise an async run() returns past
// its first await (the run ends at once, exit 0), while a 0.3 run is
// awaited. QuickJS has no console (jco's node:console needs jco's own
// host), so output goes to wasi:cli/stdout directly; process.argv would
// likewise need jco:node/process, so arguments come from
// wasi:cli/environment.
import { connect } from 'node:net';
import { getArguments } from 'wasi:cli/environment@0.3.0';
import { exit } from 'wasi:cli/exit@0.3.0';
import { getStdout } from 'wasi:cli/stdout@0.2.12';

function say(line) {
  getStdout().blockingWriteAndFlush(Buffer.from(`${line}\n`));
}

function exchange(host, port, message) {
  return new Promise((resolve, reject) => {
    let got = '';
    const socket = connect({ host, port }, () => socket.end(message));
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => { got += chunk; });
    socket.on('end', () => resolve(got));
    socket.on('error', reject);
  });
}

export const run = {
  async run() {
    const args = getArguments().slice(1);
    if (args.length !== 3) {
      say('usage: js-net HOST PORT MESSAGE');
      exit({ tag: 'err' });
    }
    const [host, port, message] = args;
    try {
      say(`got: ${await exchange(host, Number(port), message)}`);
    } catch (e) {
      say(`error: ${e.code} ${e.message}`);
      exit({ tag: 'err' });
    }
  },
};
